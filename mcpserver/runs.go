package mcpserver

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
)

// MetaRun is the _meta key by which a host names the Run a call belongs to; without it the
// Run is the MCP session.
const MetaRun = "mcp-sandbox/run"

// runOf names the Run of a request: _meta "mcp-sandbox/run" when the host gives one, else
// the MCP session id (a stdio session has none, and gets one id for its lifetime), else, for a
// request of the sessionless revision over HTTP, the request itself (its throwaway session). A
// session's own Run is recorded as ended when the session ends.
func (h *handlers) runOf(req *mcp.CallToolRequest) budget.RunRef {
	ref := budget.RunRef{Tenant: h.agent.Tenant}
	if req != nil && req.Params != nil {
		if v, ok := req.Params.Meta[MetaRun].(string); ok {
			if named, ok := execution.NamedRun(h.agent.Tenant, v); ok {
				return named
			}
		}
	}
	if req != nil && req.Session != nil {
		h.runsMu.Lock()
		defer h.runsMu.Unlock()
		id, ok := h.runs[req.Session]
		if !ok {
			if sid := req.Session.ID(); sid != "" {
				id = "session:" + sid
			} else if req.Extra != nil && req.Extra.Header != nil && req.Extra.Header.Get(headerProtocolVersion) >= revisionStateless {
				id = budget.NewID("request:r_")
			} else {
				id = budget.NewID("session:s_")
			}
			h.runs[req.Session] = id
			h.watchSession(req.Session, budget.RunRef{Tenant: h.agent.Tenant, ID: id})
		}
		ref.ID = id
		return ref
	}
	ref.ID = budget.NewID("session:s_")
	return ref
}

// watchSession records the end of a session's own Run when the session ends, on a goroutine
// that h.watchers counts: the Drain (when there is one) ends the sessions and waits for it
// before the ledger closes. Called with runsMu held.
func (h *handlers) watchSession(ss *mcp.ServerSession, run budget.RunRef) {
	led := h.opts.Ledger
	if led == nil || h.closed {
		return
	}
	h.watchers.Go(func() {
		_ = ss.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := led.EndRun(ctx, run); err != nil && !errors.Is(err, budget.ErrNotFound) {
			h.log.Warn("run end not recorded", "run", run.ID, "err", err)
		}
		h.runsMu.Lock()
		delete(h.runs, ss)
		h.runsMu.Unlock()
	})
}

// closeSessions ends every session of the server and waits for their watchers. No watcher
// starts after it.
func (h *handlers) closeSessions() {
	h.runsMu.Lock()
	h.closed = true
	h.runsMu.Unlock()
	for ss := range h.srv.Sessions() {
		_ = ss.Close()
	}
	h.watchers.Wait()
}
