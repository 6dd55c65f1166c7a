package mcpserver

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
)

// How a question crosses MCP (docs/design.md §11): package approval keeps the question, its
// pause and its answer from any path; here are the two ways it reaches the person at the host.
// A client of 2025-11-25 and earlier is asked in place by elicitation/create on the session
// that made the call (elicitation, below); a client of 2026-07-28 and later is answered
// input_required and retries the call (mrtr.go: the held call is the Asker, and the retry
// hands the answer to the Room).

// MetaAnsweredBy is the _meta key of an elicitation result by which a host may say who
// answered (a user name, an email): the ledger records it with the decision. It is optional;
// MCP has no field of its own for it.
const MetaAnsweredBy = "mcp-sandbox/answered_by"

// maxAnsweredByBytes bounds what a host says about who answered.
const maxAnsweredByBytes = 200

// approvalSchema is the form an approval asks for: no fields, only accept, decline or cancel.
var approvalSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// asking is how req's questions are asked: through asker (elicitation, or the hold a client
// answers by retrying, named hold), kept in the server's Room, for as long as the agent's
// profile says, answered at once for a call an approved plan covers.
func (h *handlers) asking(req *mcp.CallToolRequest, asker approval.Asker, hold string) *approval.Asking {
	a := &approval.Asking{Asker: asker, Room: h.room, Report: h.report, Tenant: h.agent.Tenant, Agent: h.agent.Name,
		Run: h.runKey(req), Hold: hold}
	if u := h.agent.Upstreams; u != nil {
		a.Timeout, a.PlanWindow = u.ApprovalTimeout, u.PlanWindow
	}
	if h.opts.Ledger != nil {
		// A call an approved plan of this agent lists goes without asking (docs/design.md §22).
		a.Standing = approval.Covered(h.opts.Ledger, h.agent.Tenant, h.agent.Name)
	}
	return a
}

// elicitation asks through elicitation/create on the session of a tools/call.
type elicitation struct {
	ss *mcp.ServerSession
}

func elicitationOf(req *mcp.CallToolRequest) elicitation {
	if req == nil {
		return elicitation{}
	}
	return elicitation{ss: req.Session}
}

// CanAsk: the client declared form elicitation at initialize. A client of revision
// 2026-07-28 or later that declared it is asked through input requests instead (mrtr.go), so
// one reaching here has not declared it.
func (e elicitation) CanAsk() (bool, string) {
	if e.ss == nil {
		return false, "no MCP session carries the call"
	}
	return elicitationDeclared(e.ss.InitializeParams())
}

// elicitationDeclared reports whether a client's capabilities let it be asked with a form, and
// why not when they do not.
func elicitationDeclared(ip *mcp.InitializeParams) (bool, string) {
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false, "the MCP client did not declare the elicitation capability"
	}
	if e := ip.Capabilities.Elicitation; e.Form == nil && e.URL != nil {
		return false, "the MCP client offers URL elicitation only, and approval is asked with a form"
	}
	return true, ""
}

// Ask puts q to the person and returns their answer; the Room withdraws it (the request is
// cancelled) when another path answered first.
func (e elicitation) Ask(ctx context.Context, q approval.Question) (approval.Answer, error) {
	res, err := e.ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: q.Message(), RequestedSchema: approvalSchema})
	if err != nil {
		return approval.Answer{}, err
	}
	return approval.Answer{Action: res.Action, By: answeredBy(res.Meta)}, nil
}

// answeredBy reads who answered from an elicitation result's _meta, bounded to one line.
func answeredBy(meta mcp.Meta) string {
	by, _ := meta[MetaAnsweredBy].(string)
	by = oneLine(strings.TrimSpace(by))
	if len(by) > maxAnsweredByBytes {
		by = strings.ToValidUTF8(by[:maxAnsweredByBytes], "")
	}
	return by
}
