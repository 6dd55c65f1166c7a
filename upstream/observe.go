package upstream

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// startCall starts the client span of one upstream call; the link passes its trace context on
// in the request's _meta (an MCP session) or its headers (an A2A peer): traceparent, tracestate.
func startCall(ctx context.Context, tool *Tool) (context.Context, telemetry.Span) {
	return telemetry.Start(ctx, "tools/call "+tool.Upstream, telemetry.Client,
		telemetry.String("mcp.method.name", "tools/call"),
		telemetry.String("gen_ai.operation.name", "execute_tool"),
		telemetry.String("gen_ai.tool.name", tool.Upstream),
		telemetry.String("mcp_sandbox.upstream", tool.Server))
}

// Sessions reports, for each of the Pool's servers, whether it holds a live client session
// now: the operator's view of upstream connection state. It takes each server's lock briefly.
func (p *Pool) Sessions() map[string]bool {
	out := make(map[string]bool, len(p.order))
	for _, name := range p.order {
		out[name] = p.conns[name].link.live()
	}
	return out
}
