// Package early answers `mcp-sandbox --version` (and `-V`, `version`) from its package
// initialiser, before the initialisers of the packages the rest of the binary needs: Go
// initialises a package as soon as its own imports are and no ready package sorts before it,
// and this one imports only os, so the version is printed after about twenty initialisers
// (os and what it needs, mostly) instead of all 240 (Prometheus, OTel's gRPC and protobufs,
// modernc's libc, the MCP SDK). main imports it first; any other arguments fall
// through to main, which prints the same line for `version` with arguments to refuse
// (cmd/mcp-sandbox's TestInitHelperSkipsServerInits and TestLinkerSetsTheVersion pin it).
//
// Version is the build's, set at build time with
// -ldflags "-X github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early.Version=…"
// (the Makefile's build and dist do). It imports only the standard library's os, and is
// read-only once initialised.
package early
