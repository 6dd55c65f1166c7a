package mcpserver

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP revision of 2026-07-28 (SEP-2575, SEP-2567) has no session: no initialize, no
// Mcp-Session-Id; a client names the revision in the MCP-Protocol-Version header and in every
// request's _meta (with its identity and capabilities), and learns the server's capabilities
// from server/discover. Any replica can answer any such request, so a modern client needs no
// affinity behind a load balancer. Clients of 2025-11-25 and earlier keep their sessions.
//
// go-sdk serves the two from different handlers: a stateful StreamableHTTPHandler refuses a
// request of 2026-07-28 (its transport keeps sessions), and a stateless one gives every request
// a throwaway session, which would give an old client a new Run per request and no
// notifications between requests. So each agent has both, and revisions sends each request to
// the one its revision needs.

// revisionStateless is the first revision served without a session.
const revisionStateless = "2026-07-28"

// headerProtocolVersion is the header a client names its revision in; every request of
// 2026-07-28 carries it (go-sdk checks it against the request's _meta).
const headerProtocolVersion = "Mcp-Protocol-Version"

// sessionless reports whether r is of a revision served without a session. The header alone
// decides, so nothing reads the body to route (a balancer in front could route on it too). A
// revision newer than the ones known goes there as well, where go-sdk answers it with the
// versions it supports. Revisions are dates, so they order as strings.
func sessionless(r *http.Request) bool {
	v := strings.TrimSpace(r.Header.Get(headerProtocolVersion))
	return v >= revisionStateless
}

// agentHandler serves one agent's server over streamable HTTP, both revisions on one endpoint.
//
// The stateless handler ties a request's handler context to the HTTP request: in 2026-07-28
// the POST is the whole call, so a client that goes away has cancelled it, and run_code's
// program is killed as it is on notifications/cancelled in a session.
//
// A Run in a stateless request is the one its _meta names (MetaRun), else the request itself:
// its throwaway session is its Run (runOf), recorded as ended when the request is answered.
// Notifications reach the client only within a request (progress does), and server-to-client
// requests are refused by go-sdk: an approval is asked through input requests (mrtr.go).
func agentHandler(srv *mcp.Server, o HTTPOptions) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return srv }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Logger:              o.Logger,
		SessionTimeout:      o.SessionTimeout,
		MaxRequestBodyBytes: o.MaxBodyBytes,
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		Logger:                       o.Logger,
		MaxRequestBodyBytes:          o.MaxBodyBytes,
		PropagateRequestCancellation: true,
	})
	var quotas *Quotas
	var sessions http.Handler = stateful
	if o.Server != nil {
		quotas = o.Server.Quotas
		if o.Server.Ledger != nil {
			sessions = taskWire(stateful) // run_code's tasks (tasks.go) need the ledger
		}
	}
	return quotas.sessionGate(srv, o.SessionTimeout, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sessionless(r) {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	}))
}
