// Package egress is the network a program gets under rules (network: rules) and the list the
// server's own upstream connections must pass: a rule language of names, suffixes, ports and
// plain-HTTP URL prefixes (Rules), and a forward proxy (Proxy) that decides every connection
// a sandboxed program makes, on the name the program asked for, resolves that name itself and
// refuses private, loopback, link-local and metadata addresses a rule does not name, so DNS
// rebinding has nothing to rebind. HTTPS is terminated with a per-execution CA (CA) the
// sandbox trusts, so the proxy sees every request, checks the client's SNI against the CONNECT
// name, adds the configured credential headers that the program never sees, and re-encrypts
// to the origin. Every decision is counted (Stats): the result's network block.
//
// The proxy is the host's, outside the sandbox: a backend hands it a listener that lives in
// the sandbox's own network namespace (docs/design.md §18), and the program has no other
// route out.
//
// Imports: the standard library only (and failure); engine and cmd import it.
//
// Concurrency: Rules and CA are immutable after construction (CA's leaf cache has its own
// lock) and safe for concurrent use. A Proxy serves each connection on its own goroutine;
// Stats may be called at any time, and Close waits for every goroutine it started.
package egress
