package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// maxReadBytes bounds one host read_tool_output answer (a wider window is refused; a search is
// cut to it).
const maxReadBytes = 1 << 20

// recordTimeout bounds recording work done after the handler's context may have ended.
const recordTimeout = 30 * time.Second

// errNoHandle is the one answer for a handle the caller may not read, whatever the reason:
// it never names the handle, so a foreign handle and a never-issued one read the same.
const errNoHandle = "no output is kept under this handle: it may have expired, or it was never issued to this tenant"

// ledgerAttachment is an attachment as the ledger keeps it: the result's fields plus, for a
// stream kept as a preview only, how many bytes were let go.
type ledgerAttachment struct {
	engine.Attachment
	LetGoBytes int64 `json:"let_go_bytes,omitempty"`
}

// keepOutputs puts the streams larger than their preview, and every artifact, in the blob
// store, filling in handles and locations; without a store they stay preview_only and the
// bytes let go are counted. It returns the ledger's attachment records and, under preserve
// required, the failure of a stream or artifact that could not be kept.
func (h *handlers) keepOutputs(ctx context.Context, res *engine.Result, meter *budget.Meter) ([]ledgerAttachment, *engine.Failure) {
	ce := h.agent.CodeExecution
	blobs := h.opts.Blobs
	var recs []ledgerAttachment
	var preserved int64
	var lost []string
	keep := func(a *engine.Attachment, data []byte, whole bool) int64 {
		if whole {
			a.Location = "inline"
			return 0
		}
		if blobs == nil {
			a.Location = "preview_only"
			lost = append(lost, a.Name)
			return a.Size
		}
		hd, n, err := blobs.Put(ctx, h.agent.Tenant, a.Name, a.ContentType, bytes.NewReader(data), int64(len(data))+1)
		if err != nil {
			telemetry.Logger(ctx, h.log).Warn("output not preserved", "name", a.Name, "err", err)
			a.Location = "preview_only"
			lost = append(lost, a.Name)
			return a.Size
		}
		a.Handle, a.Location = string(hd), "blob"
		preserved += n
		h.report.Kept("output", n)
		return a.Size - n
	}
	for i := range res.Attachments {
		a := &res.Attachments[i]
		var data []byte
		switch a.Name {
		case "stdout":
			data = res.StdoutData
		case "stderr":
			data = res.StderrData
		default:
			continue
		}
		letGo := keep(a, data, !a.Truncated && a.Location != "preview_only")
		recs = append(recs, ledgerAttachment{Attachment: *a, LetGoBytes: letGo})
	}
	if len(res.Value) > valuePreviewBytes {
		// A large value is an attachment too: the model's text shows a preview, and the
		// whole is kept under a handle, indented so line windows can page it.
		content, ctype := binding.HandleContent(res.Value)
		a := engine.Attachment{Name: "value", ContentType: ctype, Size: int64(len(content)), Truncated: true}
		letGo := keep(&a, content, false)
		res.Attachments = append(res.Attachments, a)
		recs = append(recs, ledgerAttachment{Attachment: a, LetGoBytes: letGo})
	}
	for i := range res.Artifacts {
		a := &res.Artifacts[i]
		if i >= len(res.ArtifactFiles) {
			break
		}
		letGo := keep(a, res.ArtifactFiles[i].Data, false)
		recs = append(recs, ledgerAttachment{Attachment: *a, LetGoBytes: letGo})
	}
	if meter != nil && preserved > 0 {
		if err := meter.Charge(ctx, budget.Usage{PreservedBytes: preserved}); err != nil {
			telemetry.Logger(ctx, h.log).Error("preserved bytes not charged", "err", err)
		}
	}
	if len(lost) > 0 && ce != nil && ce.PreserveRequired {
		return recs, &engine.Failure{Kind: failure.OutputNotPreserved, Executed: true,
			Message: fmt.Sprintf("preserve is required, but %s could not be kept in the blob store", strings.Join(lost, ", "))}
	}
	return recs, nil
}

func usageOf(u budget.Usage) engine.Usage {
	return engine.Usage{Calls: u.Calls, TransferBytes: u.TransferBytes, ProducedBytes: u.ProducedBytes, PreservedBytes: u.PreservedBytes}
}

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
		return toolError("%s", errNoHandle), nil
	case fe.Kind == failure.UpstreamError:
		h.log.Error("read_tool_output failed", "err", fe.Err)
		return toolError("the output could not be read"), nil
	default:
		return toolError("%s", fe.Message), nil
	}
	if p.Window != nil {
		return &mcp.CallToolResult{StructuredContent: p.Window, Content: []mcp.Content{&mcp.TextContent{Text: p.Window.Text}}}, nil
	}
	var b strings.Builder
	for _, x := range p.Matches.Matches {
		fmt.Fprintf(&b, "%d: %s\n", x.Line, x.Text)
	}
	if p.Matches.Truncated {
		b.WriteString("(more matches were left out; narrow the pattern or raise limit)\n")
	}
	if len(p.Matches.Matches) == 0 && !p.Matches.Truncated {
		b.WriteString("no line matches\n")
	}
	return &mcp.CallToolResult{StructuredContent: p.Matches, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, nil
}

// execute runs one program: its execution is recorded and metered in the ledger, its binding
// calls take the walk of package binding, and its outputs are kept under handles afterwards.
func (h *handlers) execute(ctx context.Context, req *mcp.CallToolRequest, code string) *engine.Result {
	ce := h.agent.CodeExecution
	run := h.runOf(req)
	// Every line about this execution, here and in the binding calls and upstreams it
	// reaches, names it, its tenant, agent and Run.
	id := budget.NewID("x_")
	log := h.log.With("execution", id, "run", run.ID)
	ctx = telemetry.WithLogger(ctx, log)
	telemetry.Current(ctx).Set(telemetry.String("mcp_sandbox.execution", id))
	var meter *budget.Meter
	if led := h.opts.Ledger; led != nil {
		m, err := budget.Start(ctx, led, run, id, h.agent.Version, ce.Budget)
		if err != nil {
			if ctx.Err() != nil {
				return h.refused(ctx, log, engine.Refuse(ce.Terms, failure.Cancelled, "the request was cancelled before the execution started"))
			}
			log.Error("execution not recorded, so not run", "err", err)
			return h.refused(ctx, log, engine.Refuse(ce.Terms, failure.Internal, "the execution could not be recorded in the run ledger, so it was not run"))
		}
		meter = m
	}
	opts := &binding.Options{Turn: h.turn(ctx), Meter: meter, Blobs: h.opts.Blobs, Tenant: h.agent.Tenant, Logger: log,
		Approvals: h.approvals(req), Report: h.report}
	if u := h.agent.Upstreams; u != nil {
		opts.MaxConcurrentCalls = u.MaxConcurrentCalls
	}
	// No upstreams granted is an empty catalogue (binding's default), not an absent one:
	// list_tools and get_tool_info still answer, and run_code is still excluded_builtin.
	x := binding.New(opts)
	ex := engine.Execution{Program: code, Terms: ce.Terms, Tools: x, ToolNames: x.Names(), Aliases: x.Aliases(), Logger: log,
		Owner: h.agent.Tenant}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		p := newProgress(ctx, req.Session, tok)
		defer p.wait()
		ex.Progress = p.report
	}
	res := ce.Sandbox.Run(ctx, ex)
	x.Wait()
	if u := x.Unavailable(); len(u) > 0 {
		res.Unavailable = append([]string(nil), u...)
	}
	a := x.Approvals()
	res.Approvals = engine.ApprovalCounts{Asked: a.Asked, Accepted: a.Accepted, Declined: a.Declined, TimedOut: a.TimedOut, Unasked: a.Unasked}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	recs, fail := h.keepOutputs(telemetry.WithLogger(rctx, log), res, meter)
	if fail != nil && res.Failure == nil {
		res.Failure = fail
	}
	if meter != nil {
		exec, runU, err := meter.Usage(rctx)
		if err != nil {
			log.Error("run usage not read", "err", err)
		}
		res.Budget = engine.BudgetReport{Execution: usageOf(exec), Run: usageOf(runU)}
	}
	// The context economy last: what the model reads is the result as it now stands.
	res.Context.Execution = engine.NewContextUsage(x.ReceivedBytes(), int64(len(RenderText(res))))
	res.Context.Run = res.Context.Execution
	if meter != nil {
		status := "completed"
		if res.Failure != nil {
			status = string(res.Failure.Kind)
		}
		if recs == nil {
			recs = []ledgerAttachment{}
		}
		aj, _ := json.Marshal(recs)
		if err := meter.End(rctx, status, aj, ledgerContext(res.Context.Execution)); err != nil {
			log.Error("execution end not recorded", "err", err)
		} else if c, err := meter.RunContext(rctx); err != nil {
			log.Error("run context not read", "err", err)
		} else {
			res.Context.Run = engine.ContextUsage{BindingBytes: c.BindingBytes, ReturnedBytes: c.ReturnedBytes, KeptOutBytes: c.KeptOutBytes}
		}
	}
	h.observe(ctx, res, log)
	return res
}

// refused observes an execution refused before it started, and returns it.
func (h *handlers) refused(ctx context.Context, log *slog.Logger, res *engine.Result) *engine.Result {
	h.observe(ctx, res, log)
	return res
}

func ledgerContext(c engine.ContextUsage) budget.Context {
	return budget.Context{BindingBytes: c.BindingBytes, ReturnedBytes: c.ReturnedBytes, KeptOutBytes: c.KeptOutBytes}
}
