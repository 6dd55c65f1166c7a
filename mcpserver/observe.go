package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// traceCalls is the receiving middleware that gives every tools/call a server span: under the
// trace context the request's _meta carries (traceparent, tracestate), or a new trace. The
// span is the parent of run_code's binding calls and of a direct call's upstream call. Its
// name carries the tool only when this server offers it, so a made-up name never becomes one.
func (h *handlers) traceCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if method != "tools/call" || !ok {
			return next(ctx, method, req)
		}
		ctx = telemetry.FromMeta(ctx, p.Meta)
		name := "tools/call"
		attrs := []telemetry.Attr{telemetry.String("mcp.method.name", method),
			telemetry.String("mcp_sandbox.tenant", h.agent.Tenant), telemetry.String("mcp_sandbox.agent", h.agent.Name)}
		if h.offers(p.Name) {
			name += " " + p.Name
			attrs = append(attrs, telemetry.String("gen_ai.tool.name", p.Name))
		}
		ctx, span := telemetry.Start(ctx, name, telemetry.Server, attrs...)
		res, err := next(ctx, method, req)
		kind := ""
		if r, ok := res.(*mcp.CallToolResult); err == nil && ok && r.IsError {
			kind = "tool_error"
			if er, ok := r.StructuredContent.(*ModelResult); ok && er.Failure != nil {
				kind = string(er.Failure.Kind)
			}
		} else if err != nil {
			kind = "protocol_error"
		}
		span.End(kind)
		return res, err
	}
}

// offers reports whether name is a tool this server offers now.
func (h *handlers) offers(name string) bool {
	switch name {
	case ToolRunCode:
		return h.agent.CodeExecution != nil
	case ToolListTools, ToolGetToolInfo, ToolReadToolOutput:
		return true
	}
	h.exposedMu.Lock()
	defer h.exposedMu.Unlock()
	_, ok := h.exposed[name]
	return ok
}

// reportDirect counts a host's direct call of an exposed tool.
func (h *handlers) reportDirect(t *upstream.Turn, name string, kind string, seconds float64, economy telemetry.Context) {
	up := t.Server(name)
	if up == "" {
		up = telemetry.UpstreamUnknown
	}
	outcome := "ok"
	if kind != "" {
		outcome = kind
	}
	h.report.Call(telemetry.Call{Upstream: up, Outcome: outcome, Direct: true, Seconds: seconds, Context: economy})
}
