package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// maxReadBytes bounds one host read_tool_output answer (a wider window is refused; a search is
// cut to it).
const maxReadBytes = 1 << 20

// readToolOutput pages any handle of the session's tenant, by line window or regex, through
// binding.Read (the same reader a program's handle.read() uses) and renders it for the host.
func (h *handlers) readToolOutput(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in binding.ReadArgs
	if bad := decodeArgs(req, &in); bad != nil {
		return bad, nil
	}
	p, fe := binding.Read(ctx, h.opts.Blobs, h.agent.Tenant, in, maxReadBytes)
	switch {
	case fe == nil:
	case fe.Kind == failure.Unavailable:
		return toolError("%s", binding.NoOutputKept), nil
	case fe.Kind == failure.UpstreamError:
		h.log.Error("read_tool_output failed", "err", fe.Err)
		return toolError("the output could not be read"), nil
	default:
		return toolError("%s", fe.Message), nil
	}
	var structured any = p.Matches
	if p.Window != nil {
		structured = p.Window
	}
	return &mcp.CallToolResult{StructuredContent: structured, Content: []mcp.Content{&mcp.TextContent{Text: p.Text()}}}, nil
}

// execute runs one program (p's code, and whether it is a rehearsal) through execution.Execute, the path `mcp-sandbox run` takes too
// (which also reports it: metrics, the span's attributes, the log line); what is the MCP
// session's is added here: the Run (runOf), the turn (which also syncs the exposed tools), the
// approval step's asking (env: elicitation on the session or input requests, and the journal
// its pauses keep), progress notifications, the agent's metrics reporter and the slot its
// tenant's quotas give it (Quotas).
func (h *handlers) execute(ctx context.Context, req *mcp.CallToolRequest, p execution.Program, env callEnv) *execution.Result {
	p.Run, p.AgentVersion, p.Turn, p.Approvals, p.Started = h.runIn(req, env), h.agent.Version, h.turn, env.asking, env.started
	p.Calls, p.Ran = env.calls, env.ran
	if p.Saved == nil && !p.Rehearse {
		p.Nested = h.nested(req, env) // a saved program calls no saved program; a rehearsal none either
	}
	if env.journal != nil {
		p.Tape = env.journal
	}
	if q := h.opts.Quotas; q != nil {
		p.Admit = func(ctx context.Context) (func(), *engine.Failure) { return q.startExecution(ctx, h.agent.Tenant) }
	}
	if env.progress != nil {
		// Held across round trips: progress goes to whichever request waits on it.
		p.Progress = env.progress
	} else if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		pr := newProgress(ctx, req.Session, tok)
		defer pr.wait()
		p.Progress = pr.report
	}
	res := execution.Execute(ctx, h.agent.CodeExecution, p, &execution.Options{Ledger: h.opts.Ledger, Blobs: h.opts.Blobs,
		Logger: h.log, Report: h.report, Render: ModelReads, Cassettes: h.opts.Cassettes})
	markRerun(res, env.journal)
	return res
}
