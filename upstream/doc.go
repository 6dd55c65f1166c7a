// Package upstream is mcp-sandbox's side as an MCP (and A2A) client: a Pool of connections to
// one tenant's upstream servers and peers, the Catalogue of their tools under model-facing
// names, the tenant policy narrowed per turn (a Turn), and binding calls made through it.
//
// Names, the policy of a turn, what a call returns, how untrusted listings are admitted,
// connections and A2A peers: docs/design.md §13. A conn reaches its server through a link, an
// MCP client session (session.go) or an A2A peer (a2a.go, a2a_dialect.go). An HTTP server's
// credential is a Bearer resolved per request, or OAuth access tokens from a TokenSource,
// renewed once on a 401 (oauth.go; upstream/oauthclient is the client-credentials one):
// docs/design.md §10. A tool's schemas are read once when it is admitted (package toolshape:
// its signature, stub, redaction and approval view); the return types observed from a
// tenant's results (observed.go; kept through a ShapeStore, observedstore.go) and list_tools'
// ranked search (search.go): docs/design.md §3.3, §3.5.
//
// # Imports and concurrency
//
// It imports failure, telemetry, toolcall (a call's answer), toolshape (a tool's schemas),
// internal/nearest (an unknown argument's "did you mean"), the go-sdk, a2a-go (A2A 0.3's types,
// package a2a), a2a-go/v2 (A2A 1.0's model and protobuf messages), protojson (which reads 1.0's
// answers), segmentio/encoding (the go-sdk's JSON decoder, which frame.go calls directly) and
// the standard library (docs/design.md §2), never budget, outputs, binding, configs or anything
// under engine/: cmd fills the plain option structs, and package binding walks a call through
// Turn to satisfy engine.ToolCaller. Nothing here writes to stdout.
//
// A Pool, a Catalogue and a Turn are safe for concurrent use; a Catalogue and a Turn are
// immutable snapshots. Every goroutine a Pool starts (session watchers, OnToolsChanged calls,
// the closing of a server that failed to connect) is owned by the Pool and waited for by Close
// (bounded by its grace period); a stdio server's stderr reader and waiter are owned by its
// process and waited for when it is closed; an A2A call starts no goroutine of its own. The
// tests' TestMain checks that none outlives them. Lock order: Pool.mu before conn.mu; a link's
// own mutex (session.mu, peer.mu) is a leaf; conn.lock (a channel, so waiting honours the
// context) is never waited for with a mutex held. The Pool's observations have a mutex of
// their own, a leaf: nothing is taken under it; with a ShapeStore their turn (a channel) is
// held while the store is called, and taken before that mutex. The goroutine that merges
// observed samples into the store is the Pool's too.
package upstream
