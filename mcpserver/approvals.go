package mcpserver

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
)

// MetaAnsweredBy is the _meta key of an elicitation result by which a host may say who
// answered (a user name, an email): the ledger records it with the decision. It is optional;
// MCP has no field of its own for it.
const MetaAnsweredBy = "mcp-sandbox/answered_by"

// maxAnsweredByBytes bounds what a host says about who answered.
const maxAnsweredByBytes = 200

// approvalSchema is the form an approval asks for: no fields, only accept, decline or cancel.
var approvalSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// approvals is the approval step's configuration for one tools/call: the person is asked on
// the session that made the call, for as long as the agent's profile says.
func (h *handlers) approvals(req *mcp.CallToolRequest) *binding.Approvals {
	a := &binding.Approvals{Asker: askerOf(req), Report: h.report}
	if u := h.agent.Upstreams; u != nil {
		a.Timeout = u.ApprovalTimeout
	}
	return a
}

// sessionAsker asks through elicitation/create on the session of a tools/call.
type sessionAsker struct {
	ss *mcp.ServerSession
}

func askerOf(req *mcp.CallToolRequest) sessionAsker {
	if req == nil {
		return sessionAsker{}
	}
	return sessionAsker{ss: req.Session}
}

// CanAsk: the client declared form elicitation at initialize. A client of revision
// 2026-07-28 or later that declared it is asked through input requests instead (mrtr.go), so
// one reaching here has not declared it.
func (a sessionAsker) CanAsk() (bool, string) {
	if a.ss == nil {
		return false, "no MCP session carries the call"
	}
	return elicitationDeclared(a.ss.InitializeParams())
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

func (a sessionAsker) Ask(ctx context.Context, q binding.Question) (binding.Answer, error) {
	res, err := a.ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: q.Message(), RequestedSchema: approvalSchema})
	if err != nil {
		return binding.Answer{}, err
	}
	return binding.Answer{Action: res.Action, By: answeredBy(res.Meta)}, nil
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
