// Command release builds mcp-sandbox's release archives for an install without Go: one
// binary per target (linux, darwin and windows on amd64 and arm64), each packed with the
// files its users are told to copy (tar.gz; zip for Windows), checksums.txt, and two
// manifests that later steps read (artifacts.json: every binary and archive with its
// platform; metadata.json: the version). `make dist` runs it after the init helper's
// overlays are written (internal/inithelper/overlay).
//
//	go run ./tools/release -version 1.2.3 -o dist [-overlays bin/init-helper] [FILE[=NAME] ...]
//
// Each binary is built as `make build` builds it, with cgo off, -trimpath and without symbol
// tables: `make cross` builds darwin/amd64 and windows/amd64 with the same flags, so their
// packages come from the build cache here. It replaced goreleaser, whose own build from the
// module proxy (about 1,600 packages) cost a fresh CI machine more than the six targets did
// (docs/design.md §16.4). It runs in the module's root and writes only under -o. It imports the standard library
// only.
package main
