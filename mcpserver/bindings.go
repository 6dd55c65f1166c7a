package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// syncTimeout bounds the catalogue refresh that follows an upstream's tools/list_changed.
const syncTimeout = 30 * time.Second

// Upstreams is an agent's access to its tenant's upstream tools: where the catalogue comes
// from and the policy that narrows it, as plain values (cmd converts the config).
type Upstreams struct {
	// Catalogue returns the tenant's current catalogue (upstream.Pool.Catalogue). It is called
	// at every turn boundary and must be safe for concurrent use.
	Catalogue func(ctx context.Context) *upstream.Catalogue
	// Grant names the upstream servers the tenant is granted.
	Grant []string
	// Deny and ApprovalRequired are the tenant policy's globs over model-facing names.
	Deny, ApprovalRequired []string
	// IgnoreDestructive and Rules are the rest of the tenant policy (upstream.Policy).
	IgnoreDestructive bool
	Rules             []upstream.Rule
	// Bindings is the agent's bindings list; nil means every callable tool.
	Bindings *[]string
	// ApprovalTimeout bounds how long a call waits for a person's approval (the profile's
	// approvals.timeout_seconds); zero means binding.DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Expose offers the granted tools of non-deferred servers directly in tools/list.
	Expose bool
	// policy, when set by SetPolicy, replaces Grant, Deny, ApprovalRequired, IgnoreDestructive,
	// Rules and Bindings.
	policy atomic.Pointer[UpstreamPolicy]
	// Watch, when set, is called once by NewServer with a function to call whenever an
	// upstream announced a change of its tools; the server then re-syncs its exposed tools,
	// which sends notifications/tools/list_changed to its sessions. The function may be called
	// from any goroutine.
	Watch func(changed func())
}

// UpstreamPolicy is the part of an agent's upstream access that a config reload may change:
// it takes effect at the next turn boundary.
type UpstreamPolicy struct {
	Grant, Deny, ApprovalRequired []string
	IgnoreDestructive             bool
	Rules                         []upstream.Rule
	Bindings                      *[]string
}

// SetPolicy replaces the grant, policy and bindings from the next turn on. Safe for concurrent
// use with turns in flight, which keep what they resolved.
func (u *Upstreams) SetPolicy(p UpstreamPolicy) { u.policy.Store(&p) }

func (u *Upstreams) current() UpstreamPolicy {
	if p := u.policy.Load(); p != nil {
		return *p
	}
	return UpstreamPolicy{Grant: u.Grant, Deny: u.Deny, ApprovalRequired: u.ApprovalRequired,
		IgnoreDestructive: u.IgnoreDestructive, Rules: u.Rules, Bindings: u.Bindings}
}

// Turn resolves the catalogue for one turn under the current policy, or returns nil when u is
// nil or has no catalogue. `mcp-sandbox run` resolves its one turn with it, as the server
// does at each of its turn boundaries.
func (u *Upstreams) Turn(ctx context.Context) *upstream.Turn {
	if u == nil || u.Catalogue == nil {
		return nil
	}
	p := u.current()
	return u.Catalogue(ctx).ResolvePolicy(upstream.Policy{Grant: p.Grant, Deny: p.Deny, ApprovalRequired: p.ApprovalRequired,
		IgnoreDestructive: p.IgnoreDestructive, Rules: p.Rules, Bindings: p.Bindings})
}

// turn resolves the catalogue for one turn (one run_code, list_tools, get_tool_info or direct
// call), or returns nil when the agent has no upstreams. It also brings the exposed tool set in
// line with the turn, so a withdrawn tool disappears from tools/list at the next turn.
func (h *handlers) turn(ctx context.Context) *upstream.Turn {
	u := h.agent.Upstreams
	t := u.Turn(ctx)
	if t != nil && u.Expose {
		h.syncExposed(t)
	}
	return t
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
	want := map[string]string{}
	defs := map[string]*mcp.Tool{}
	for _, tool := range t.Exposed() {
		def, ok := exposedDef(tool, t.NeedsApproval(tool))
		if !ok {
			h.log.Warn("upstream tool not exposed: its input schema is not an object schema", "tool", tool.Name)
			continue
		}
		b, _ := json.Marshal(def)
		want[tool.Name], defs[tool.Name] = string(b), def
	}
	var gone []string
	for name := range h.exposed {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		h.srv.RemoveTools(gone...)
		for _, n := range gone {
			delete(h.exposed, n)
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if h.exposed[name] == want[name] {
			continue
		}
		h.srv.AddTool(defs[name], func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return h.direct(ctx, name, req)
		})
		h.exposed[name] = want[name]
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
	def := &mcp.Tool{
		Name:        tool.Name,
		Title:       tool.Def.Title,
		Description: tool.Def.Description,
		InputSchema: tool.Def.InputSchema,
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
	b, err := json.Marshal(def.InputSchema)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m["type"] != "object" {
		return nil, false
	}
	def.InputSchema = json.RawMessage(b)
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
	start := time.Now()
	r := binding.Direct(ctx, t, meter, h.approvals(req), h.log, name, req.Params.Arguments)
	h.reportDirect(t, name, string(r.Kind), time.Since(start).Seconds())
	h.log.Info("direct call", "tool", name, "kind", string(r.Kind))
	if r.Kind != "" {
		return toolError("%s (%s)", r.Message, r.Kind), nil
	}
	return valueResult(r.Value), nil
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

// listToolsText renders a list_tools page for the model: one line per tool, then one line
// per server with a problem. Names are validated and descriptions, reasons and problems are
// single lines (upstream.Tool.Summary), so no upstream text can forge a line here.
func listToolsText(page upstream.ListToolsPage) string {
	var b strings.Builder
	if len(page.Tools) == 0 {
		b.WriteString("No tool matches.\n")
	} else if page.Matched != nil {
		fmt.Fprintf(&b, "%d tools match, best first (BM25 score in brackets):\n", *page.Matched)
	}
	for _, t := range page.Tools {
		b.WriteString(t.Name)
		if t.Score != nil {
			fmt.Fprintf(&b, " [%g]", *t.Score)
		}
		if t.Alias != nil {
			b.WriteString(" (alias)")
		}
		if t.Description != "" {
			b.WriteString(": " + t.Description)
		}
		if t.Unavailable != "" {
			b.WriteString(" [unavailable: " + oneLine(t.Unavailable) + "]")
		}
		b.WriteByte('\n')
	}
	if page.NextCursor != "" {
		fmt.Fprintf(&b, "more: call list_tools again with cursor %q\n", page.NextCursor)
	}
	servers := make([]string, 0, len(page.Problems))
	for s := range page.Problems {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		fmt.Fprintf(&b, "note on server %s: %s\n", s, oneLine(page.Problems[s]))
	}
	return strings.TrimRight(b.String(), "\n")
}

// oneLine replaces line breaks and other control characters with spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}
