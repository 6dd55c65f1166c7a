package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// syncTimeout bounds the catalogue refresh that follows an upstream's tools/list_changed.
const syncTimeout = 30 * time.Second

// turn resolves the catalogue for one turn (one run_code, list_tools, get_tool_info or direct
// call), or returns nil when the agent has no upstreams. It also brings the exposed tool set in
// line with the turn, so a withdrawn tool disappears from tools/list at the next turn.
func (h *handlers) turn(ctx context.Context) *upstream.Turn {
	u := h.agent.Upstreams
	t := u.Turn(ctx)
	if t != nil && u.Expose {
		h.syncExposed(t)
	}
	if t != nil {
		h.syncReadOnly(t)
	}
	return t
}

// listing is the turn boundary of a host's tools/list: turn, except that an upstream still
// starting is not waited for (Upstreams.Current); its tools are added when its listing
// lands, and go-sdk announces them with tools/list_changed. Until then run_code is not
// read-only (Turn.ReadOnly: a server not yet listed may offer anything). The saved programs
// offered are brought in line with the ledger here too (syncPrograms).
func (h *handlers) listing(ctx context.Context) {
	u := h.agent.Upstreams
	t := u.listingTurn(ctx)
	if t != nil && u.Expose {
		h.syncExposed(t)
	}
	if t != nil {
		h.syncReadOnly(t)
	}
	h.syncPrograms(ctx, t)
}

// resync is the Watch callback: refresh the catalogue and the exposed set.
func (h *handlers) resync() {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	h.turn(ctx)
}

// syncExposed adds, replaces and removes the server's direct upstream tools so that they are
// exactly t.Exposed(). go-sdk sends notifications/tools/list_changed for each change.
func (h *handlers) syncExposed(t *upstream.Turn) {
	h.exposedMu.Lock()
	defer h.exposedMu.Unlock()
	defs := map[string]*mcp.Tool{}
	for _, tool := range t.Exposed() {
		def, ok := exposedDef(tool, t.NeedsApproval(tool))
		if !ok {
			h.log.Warn("upstream tool not exposed: its input schema is not an object schema", "tool", tool.Name)
			continue
		}
		defs[tool.Name] = def
	}
	h.setTools(h.exposed, defs, func(name string) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return h.direct(ctx, name, req)
		}
	})
}

// setTools makes the tools have tracks (name → the definition's JSON) exactly defs: it removes
// the others, and adds or replaces, in name order, each whose definition changed, served by
// serve(name). go-sdk sends notifications/tools/list_changed for each change. The caller holds
// the lock that guards have.
func (h *handlers) setTools(have map[string]string, defs map[string]*mcp.Tool, serve func(name string) mcp.ToolHandler) {
	want := make(map[string]string, len(defs))
	for name, def := range defs {
		b, _ := json.Marshal(def)
		want[name] = string(b)
	}
	var gone []string
	for name := range have {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		h.srv.RemoveTools(gone...)
		for _, n := range gone {
			delete(have, n)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if have[name] == want[name] {
			continue
		}
		h.srv.AddTool(defs[name], serve(name))
		have[name] = want[name]
	}
}

// exposedDef is the host-facing definition of an upstream tool: its own, under the
// model-facing name. The output schema is left out: the direct call's result is our rendering
// of the upstream's, and go-sdk refuses a definition whose schemas are not object schemas. A
// tool that may need a person's approval is annotated destructive (and not read-only), so a
// host that asks its person before such calls does so.
func exposedDef(tool *upstream.Tool, needsApproval bool) (*mcp.Tool, bool) {
	if tool.Def == nil {
		return nil, false
	}
	schema, ok := tool.HostInputSchema()
	if !ok {
		return nil, false
	}
	def := &mcp.Tool{
		Name:        tool.Name,
		Title:       tool.Def.Title,
		Description: tool.Def.Description,
		InputSchema: schema,
		Annotations: tool.Def.Annotations,
	}
	if needsApproval {
		var a mcp.ToolAnnotations
		if tool.Def.Annotations != nil {
			a = *tool.Def.Annotations
		}
		a.DestructiveHint, a.ReadOnlyHint = ptr(true), false
		def.Annotations = &a
	}
	return def, true
}

// direct serves a host's direct call of an exposed tool, through the same policy and approval
// as a program's call (minus bindings).
func (h *handlers) direct(ctx context.Context, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	t := h.turn(ctx)
	if t == nil {
		return toolError("%s is no longer available", name), nil
	}
	var meter *budget.Meter
	if led := h.opts.Ledger; led != nil {
		meter = budget.Direct(led, h.runOf(req))
	}
	return h.serveCall(ctx, req, func(ctx context.Context, env callEnv) *mcp.CallToolResult {
		start := time.Now()
		keep := binding.Keep{Blobs: h.opts.Blobs, Tenant: h.agent.Tenant, PreviewBytes: execution.ValuePreviewBytes - keptNoteBytes}
		r := binding.DirectKept(ctx, t, meter, env.asking, h.log, name, req.Params.Arguments, keep)
		h.log.Info("direct call", "tool", name, "kind", string(r.Kind))
		var res *mcp.CallToolResult
		var economy telemetry.Context
		switch {
		case r.Kind != "":
			res = toolError("%s (%s)", r.Message, r.Kind)
		case r.Handle != nil:
			h.report.Kept("direct", r.Handle.Size)
			res = keptResult(name, r)
		default:
			res = valueResult(r.Value)
		}
		if r.Kind == "" {
			returned := int64(len(resultText(res)))
			economy = telemetry.Context{BindingBytes: r.Size, ReturnedBytes: returned, KeptOutBytes: max(r.Size-returned, 0)}
		}
		h.reportDirect(t, name, string(r.Kind), time.Since(start).Seconds(), economy)
		return res
	}), nil
}

// keptNoteBytes is the room keptResult's note and structuredContent take beside the preview,
// so that the whole result (its JSON, for a preview of ordinary text) stays within
// execution.ValuePreviewBytes.
const keptNoteBytes = 700

// Kept is the structuredContent of a direct call whose result was kept under a handle: the
// handle read_tool_output pages, what it holds, and the call's context economy (the result's
// bytes, the bytes of the text the host got, and the difference kept out of its context).
type Kept struct {
	Handle      string            `json:"handle"`
	ContentType string            `json:"content_type"`
	Size        int64             `json:"size"`
	Lines       int               `json:"lines"`
	Context     telemetry.Context `json:"context"`
}

// keptResult renders a kept direct result: the head-and-tail preview and a note naming the
// handle as text, and Kept as structuredContent (no second copy of the preview).
func keptResult(name string, r binding.DirectAnswer) *mcp.CallToolResult {
	text := fmt.Sprintf("%s\n(the result of %s is %d bytes, %d lines, shown as a head-and-tail preview; read_tool_output handle %s pages the rest by line window or pattern)",
		strings.TrimRight(r.Preview, "\n"), name, r.Handle.Size, r.Handle.Lines, r.Handle.ID)
	k := Kept{Handle: r.Handle.ID, ContentType: r.ContentType, Size: r.Handle.Size, Lines: r.Handle.Lines,
		Context: telemetry.Context{BindingBytes: r.Size, ReturnedBytes: int64(len(text)), KeptOutBytes: max(r.Size-int64(len(text)), 0)}}
	return &mcp.CallToolResult{StructuredContent: k, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// resultText is the text of res's text blocks: what the model reads of a direct call.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// valueResult renders a binding value for a host: an object as structuredContent with its
// JSON as text, a string as text, anything else as its JSON text.
func valueResult(v json.RawMessage) *mcp.CallToolResult {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	res := &mcp.CallToolResult{}
	var s string
	switch {
	case v[0] == '"' && json.Unmarshal(v, &s) == nil:
		res.Content = []mcp.Content{&mcp.TextContent{Text: s}}
	case v[0] == '{':
		res.StructuredContent = v
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(v)}}
	default:
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(v)}}
	}
	return res
}
