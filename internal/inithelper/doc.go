// Package inithelper is the init helper the Linux backends exec for each sandbox child: the
// helper alone (./helper: internal/launch and nothing else), when this build embeds it, or
// else this binary itself, which holds the same helper. A binary of the helper alone starts
// in about half the CPU of the whole server binary (docs/design.md §19.1), and every child
// starts it once or twice. The build embeds it only when made through ./overlay (make build,
// make dist, the tests' builds): `go build -overlay` adds the helper to ./embedded for that one
// build, so a plain `go build` embeds none and never one left over from an earlier build.
//
// An embedded helper is written once to a file of this uid's (install_linux.go) and held
// there for the process's life; the backends exec that path. cmd/mcp-sandbox asks Resolve
// once, for every profile alike. It imports internal/owner and x/sys (the check of a directory of
// this uid's, and the flocks that keep a helper in use from being pruned).
// Resolve is safe for concurrent use.
package inithelper
