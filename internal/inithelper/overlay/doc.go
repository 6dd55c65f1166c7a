// Command overlay builds the init helper for one target and writes the overlay that makes a
// build of mcp-sandbox embed it: `go build -overlay DIR/overlay.json ./cmd/mcp-sandbox`.
// It is the one recipe `make build`, `make dist` and the tests' builds
// (internal/testkit) use, so each embeds a helper built from the same sources in the same
// build, never one left over from an earlier build (docs/design.md §19.1).
//
//	go run ./internal/inithelper/overlay -goos linux -goarch amd64 -o DIR
//
// It runs in the module's root. For a target other than linux the overlay replaces nothing:
// only the Linux backends exec the helper on its own. It imports the standard library only.
package main
