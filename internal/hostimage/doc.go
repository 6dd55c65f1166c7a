// Package hostimage builds `mcp-sandbox image build`'s images from this host's own files
// (docs/design.md §20): a root filesystem written as a tar stream straight into the runtime's
// import (the interpreter, its standard library and the shared libraries it loads; or this
// binary, the libraries it loads and the CA certificates), tagged, then tried once with no
// network before it is called built. Nothing is pulled and no registry is reached. The files
// are Linux's, so Build refuses elsewhere (build_other.go). cmd/mcp-sandbox parses the flags
// and hands Build a Spec.
//
// It imports x/sys (the trial's rlimits) and the standard library. Build runs one import at a
// time and owns the goroutine that writes the stream.
package hostimage
