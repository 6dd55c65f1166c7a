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
	// sessionless: the request is of the 2026-07-28 revision, in which go-sdk refuses every
	// server-to-client request.
	sessionless bool
}

func askerOf(req *mcp.CallToolRequest) sessionAsker {
	a := sessionAsker{}
	if req == nil {
		return a
	}
	a.ss = req.Session
	if req.Extra != nil && req.Extra.Header != nil {
		a.sessionless = strings.TrimSpace(req.Extra.Header.Get(headerProtocolVersion)) >= revisionStateless
	}
	return a
}

// CanAsk: the client declared form elicitation at initialize, over a revision that lets the
// server send it a request.
func (a sessionAsker) CanAsk() (bool, string) {
	if a.ss == nil {
		return false, "no MCP session carries the call"
	}
	ip := a.ss.InitializeParams()
	if a.sessionless || ip != nil && ip.ProtocolVersion >= revisionStateless {
		// The revision asks through input requests in a tool's result (SEP-2322), which this
		// server does not send yet; go-sdk refuses elicitation/create there.
		return false, "the client speaks MCP revision " + revisionStateless + " or later, in which this server cannot put the question to the person"
	}
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
	by, _ := res.Meta[MetaAnsweredBy].(string)
	by = oneLine(strings.TrimSpace(by))
	if len(by) > maxAnsweredByBytes {
		by = strings.ToValidUTF8(by[:maxAnsweredByBytes], "")
	}
	return binding.Answer{Action: res.Action, By: by}, nil
}
