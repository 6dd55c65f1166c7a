package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Kind is the kind of a refused or failed binding call, as a program's ToolError.kind sees it
// (DESIGN.md §3.5). The strings are permanent API.
type Kind string

// The kinds a Reply can carry. budget and outputs add argument_too_large, budget_exceeded,
// binding_result_too_large and binding_result_not_paged through a Caller.
const (
	Unavailable               Kind = "unavailable"
	Denied                    Kind = "denied"
	ApprovalRequiredInProgram Kind = "approval_required_in_program"
	ExcludedBuiltin           Kind = "excluded_builtin"
	InvalidArguments          Kind = "invalid_arguments"
	ArgumentTooLarge          Kind = "argument_too_large"
	BudgetExceeded            Kind = "budget_exceeded"
	BindingResultTooLarge     Kind = "binding_result_too_large"
	BindingResultNotPaged     Kind = "binding_result_not_paged"
	ToolError                 Kind = "tool_error"
	UpstreamError             Kind = "upstream_error"
	Timeout                   Kind = "timeout"
	Cancelled                 Kind = "cancelled"
)

// Reply is the answer to one call. Kind is empty on success, and Value then holds the tool's
// value (see the package doc for the conversion); otherwise Message says why, in words safe to
// show a model.
type Reply struct {
	Value   json.RawMessage
	Kind    Kind
	Message string
	// Tool is the model-facing name called.
	Tool string
	// Size is the number of bytes the upstream produced for this call (its result, marshalled),
	// zero when it was not called; budget meters count it whether or not the value is delivered.
	Size int
	// Called is true when the upstream was reached, so recording knows a call was spent.
	Called bool
}

func refuse(tool string, k Kind, format string, args ...any) Reply {
	return Reply{Tool: tool, Kind: k, Message: fmt.Sprintf(format, args...)}
}

// Call is one upstream call about to be made, as a Caller sees it.
type Call struct {
	Tool *Tool
	// Args is the argument object, already validated.
	Args json.RawMessage
	// Direct is true for a host's direct call, false for a call from a program.
	Direct bool
}

// Caller wraps the upstream calls a Turn makes, after policy and validation passed: budget
// meters and the run ledger hook in here. It calls next to reach the upstream (or does not, to
// refuse with its own Reply). It must be safe for concurrent use.
type Caller interface {
	CallUpstream(ctx context.Context, c Call, next func(context.Context) Reply) Reply
}

// CallerFunc adapts a function to a Caller.
type CallerFunc func(ctx context.Context, c Call, next func(context.Context) Reply) Reply

// CallUpstream calls f.
func (f CallerFunc) CallUpstream(ctx context.Context, c Call, next func(context.Context) Reply) Reply {
	return f(ctx, c, next)
}

// Turn is the catalogue narrowed by a tenant's policy and an agent's bindings for one turn. It
// is immutable and safe for concurrent use.
type Turn struct {
	cat         *Catalogue
	granted     map[string]bool
	deny        []string
	approval    []string
	callable    map[string]*Tool // granted, not denied
	bound       map[string]*Tool // callable, narrowed by bindings: what a program may call
	names       []string         // sorted keys of bound
	unavailable []string
	callers     []Caller
}

// Resolve narrows c for one turn: grant names the servers the tenant is granted, deny and
// approval are globs over model-facing names, and bindings (nil: every callable tool) narrows
// what a program may call. Entries of bindings may be names or globs such as "docs__*".
func (c *Catalogue) Resolve(grant, deny, approval []string, bindings *[]string) *Turn {
	t := &Turn{
		cat:      c,
		granted:  map[string]bool{},
		deny:     append([]string(nil), deny...),
		approval: append([]string(nil), approval...),
		callable: map[string]*Tool{},
		bound:    map[string]*Tool{},
	}
	for _, g := range grant {
		t.granted[g] = true
	}
	for _, tool := range c.tools {
		if t.granted[tool.Server] && !matchAny(t.deny, tool.Name) {
			t.callable[tool.Name] = tool
		}
	}
	if bindings == nil {
		for n, tool := range t.callable {
			t.bound[n] = tool
		}
	} else {
		for _, b := range *bindings {
			hit := false
			for n, tool := range t.callable {
				if glob(b, n) {
					t.bound[n], hit = tool, true
				}
			}
			if !hit {
				t.unavailable = append(t.unavailable, b)
			}
		}
		sort.Strings(t.unavailable)
	}
	for n := range t.bound {
		t.names = append(t.names, n)
	}
	sort.Strings(t.names)
	return t
}

// EmptyTurn returns a Turn with no servers granted and no tools: list_tools and get_tool_info
// answer from an empty catalogue, and the built-in refusals still apply. It is what a program
// gets when its tenant is granted no upstreams.
func EmptyTurn() *Turn {
	return newCatalogue(nil, nil, map[string]string{}).Resolve(nil, nil, nil, nil)
}

// With returns a copy of t whose upstream calls go through callers, outermost first, after
// any t already has.
func (t *Turn) With(callers ...Caller) *Turn {
	u := *t
	u.callers = append(append([]Caller(nil), t.callers...), callers...)
	return &u
}

// Names returns the sorted names a program may call: the program's TOOLS. A tool the
// catalogue holds as unavailable is not among them (list_tools shows it with the reason).
func (t *Turn) Names() []string {
	out := make([]string, 0, len(t.names))
	for _, n := range t.names {
		if t.bound[n].Unavailable == "" {
			out = append(out, n)
		}
	}
	return out
}

// Aliases returns the sorted names of Names that are bound as Python names too.
func (t *Turn) Aliases() []string {
	var out []string
	for _, n := range t.Names() {
		if Aliasable(n) {
			out = append(out, n)
		}
	}
	return out
}

// Unavailable returns the sorted entries of an explicit bindings list that resolve to no
// callable tool: the result's unavailable_bindings.
func (t *Turn) Unavailable() []string { return t.unavailable }

// Exposed returns the callable tools of non-deferred servers, sorted: what a host may be offered
// directly. bindings do not narrow it; they are about programs.
func (t *Turn) Exposed() []*Tool {
	var out []*Tool
	for _, tool := range t.cat.tools {
		if !tool.Deferred && t.callable[tool.Name] != nil && tool.Unavailable == "" {
			out = append(out, tool)
		}
	}
	return out
}

// NeedsApproval reports whether tool needs a person's approval: it matches an
// approval_required glob or is annotated destructive.
func (t *Turn) NeedsApproval(tool *Tool) bool {
	return tool.Destructive || matchAny(t.approval, tool.Name)
}

// Built-in names a program may call besides upstream tools.
const (
	BuiltinListTools   = "list_tools"
	BuiltinGetToolInfo = "get_tool_info"
)

// excluded says why a built-in of the MCP face is not callable from a program.
var excluded = map[string]string{
	"run_code":         "run_code cannot be called from a program: an execution must not start another execution.",
	"read_tool_output": "read_tool_output is answered by the sandbox for this execution's own handles; use the handle's read() method.",
}

// Call makes a binding call from a program: name is a model-facing name or a built-in, args a
// JSON object (empty or null means {}).
func (t *Turn) Call(ctx context.Context, name string, args json.RawMessage) Reply {
	return t.call(ctx, name, args, false)
}

// CallDirect makes a host's direct call of an exposed or bindable tool. The same policy
// applies except bindings (an agent's program setting) and approval (the host asks the
// person); built-ins are the MCP face's own business and are not served here.
func (t *Turn) CallDirect(ctx context.Context, name string, args json.RawMessage) Reply {
	return t.call(ctx, name, args, true)
}

func (t *Turn) call(ctx context.Context, name string, args json.RawMessage, direct bool) Reply {
	if !direct {
		switch name {
		case BuiltinListTools:
			return t.builtinListTools(name, args)
		case BuiltinGetToolInfo:
			return t.builtinGetToolInfo(name, args)
		}
		if why, ok := excluded[name]; ok {
			return refuse(name, ExcludedBuiltin, "%s", why)
		}
	}
	server, _, ok := SplitName(name)
	if !ok {
		if direct {
			return refuse(name, Unavailable, "no tool named %q", name)
		}
		return refuse(name, Unavailable, "no tool named %q: a program may call upstream tools (<server>__<tool>), list_tools and get_tool_info", name)
	}
	tool, ok := t.cat.byName[name]
	if !ok || !t.granted[server] {
		if p, bad := t.cat.problems[server]; bad && t.granted[server] {
			return refuse(name, Unavailable, "no tool named %q is available: %s", name, p)
		}
		return refuse(name, Unavailable, "no tool named %q is available", name)
	}
	if matchAny(t.deny, name) {
		return refuse(name, Denied, "%s is denied by this tenant's policy", name)
	}
	if !direct && t.bound[name] == nil {
		return refuse(name, Unavailable, "%s is not among this agent's bindings", name)
	}
	if tool.Unavailable != "" {
		return refuse(name, Unavailable, "%s is unavailable: %s", name, tool.Unavailable)
	}
	if !direct && t.NeedsApproval(tool) {
		return refuse(name, ApprovalRequiredInProgram,
			"%s needs a person's approval, which cannot be asked for inside a program; call it directly as a tool instead", name)
	}
	obj, canon, err := argumentObject(args)
	if err != nil {
		return refuse(name, InvalidArguments, "arguments for %s: %v", name, err)
	}
	if err := tool.CheckArguments(obj); err != nil {
		return refuse(name, InvalidArguments, "arguments for %s %s", name, clip(err.Error(), 600))
	}
	call := Call{Tool: tool, Args: canon, Direct: direct}
	next := func(ctx context.Context) Reply { return t.upstream(ctx, tool, canon) }
	for i := len(t.callers) - 1; i >= 0; i-- {
		c, inner := t.callers[i], next
		next = func(ctx context.Context) Reply { return c.CallUpstream(ctx, call, inner) }
	}
	r := next(ctx)
	r.Tool = name
	return r
}

// argumentObject decodes args as a JSON object, the form every tool takes.
func argumentObject(args json.RawMessage) (map[string]any, json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	var obj map[string]any
	// Numbers decode as float64 for validation only; the upstream gets the bytes as sent.
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&obj); err != nil {
		return nil, nil, errors.New("arguments are not valid JSON")
	}
	if dec.More() {
		return nil, nil, errors.New("arguments hold more than one JSON value")
	}
	return obj, json.RawMessage(trimmed), nil
}

func (t *Turn) upstream(ctx context.Context, tool *Tool, args json.RawMessage) Reply {
	c := t.cat.pool.conns[tool.Server]
	res, err := c.call(ctx, tool.Upstream, args)
	var notSent *notSentError
	switch {
	case err == nil:
	case errors.As(err, &notSent):
		// No session could be had, so the server never saw the call: nothing was spent.
		if errors.Is(err, context.DeadlineExceeded) {
			return Reply{Kind: Timeout, Message: fmt.Sprintf("%s was not called: the time ran out while connecting to %q", tool.Name, tool.Server)}
		}
		if errors.Is(err, context.Canceled) {
			return Reply{Kind: Cancelled, Message: fmt.Sprintf("%s was not called: cancelled while connecting to %q", tool.Name, tool.Server)}
		}
		t.cat.pool.logger.Warn("upstream connect failed", "server", tool.Server, "tool", tool.Upstream, "err", redactErr(err))
		return Reply{Kind: UpstreamError, Message: fmt.Sprintf("the upstream server %q could not be reached for the call of %s; it was not called", tool.Server, tool.Name)}
	case errors.Is(err, errCallTimeout) || errors.Is(err, context.DeadlineExceeded):
		return Reply{Kind: Timeout, Message: fmt.Sprintf("%s did not answer in time", tool.Name), Called: true}
	case errors.Is(err, context.Canceled):
		return Reply{Kind: Cancelled, Message: fmt.Sprintf("the call of %s was cancelled", tool.Name), Called: true}
	default:
		t.cat.pool.logger.Warn("upstream call failed", "server", tool.Server, "tool", tool.Upstream, "err", redactErr(err))
		return Reply{Kind: UpstreamError, Message: fmt.Sprintf("the upstream server %q failed to answer the call of %s; it was not retried", tool.Server, tool.Name), Called: true}
	}
	raw, _ := json.Marshal(res)
	r := Reply{Size: len(raw), Called: true}
	if res.IsError {
		r.Kind, r.Message = ToolError, clip(resultText(res), 4000)
		if r.Message == "" {
			r.Message = tool.Name + " reported an error without text"
		}
		return r
	}
	v, err := resultValue(res)
	if err != nil {
		return Reply{Kind: UpstreamError, Message: fmt.Sprintf("the result of %s could not be encoded", tool.Name), Called: true, Size: len(raw)}
	}
	r.Value = v
	return r
}

// resultValue converts a result as DESIGN.md §3.5 says: structuredContent when present; the
// text of a single text block; otherwise the content blocks as objects.
func resultValue(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return json.Marshal(tc.Text)
		}
	}
	blocks := res.Content
	if blocks == nil {
		blocks = []mcp.Content{}
	}
	return json.Marshal(blocks)
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// glob matches name against pattern with path.Match syntax (* ? [...] and \\ escapes), the
// syntax configs validates, except that "/" is an ordinary character, so "*" matches any run
// of characters. A malformed pattern matches nothing (validation rejects it earlier).
func glob(pattern, name string) bool {
	ok, err := path.Match(strings.ReplaceAll(pattern, "/", slashStandIn), strings.ReplaceAll(name, "/", slashStandIn))
	return err == nil && ok
}

// slashStandIn replaces "/" on both sides of a match, since path.Match treats "/" specially.
const slashStandIn = "\uE000"

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if glob(p, name) {
			return true
		}
	}
	return false
}

// Limit returns a Caller that lets at most n upstream calls through at once; the others wait,
// and one whose context ends while waiting is cancelled (or times out) without being made. A
// Turn made for one execution gets its own Limit: that is the per-execution concurrency cap.
func Limit(n int) Caller {
	if n < 1 {
		n = 1
	}
	return &limiter{slots: make(chan struct{}, n)}
}

type limiter struct{ slots chan struct{} }

func (l *limiter) CallUpstream(ctx context.Context, c Call, next func(context.Context) Reply) Reply {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Reply{Kind: Timeout, Message: fmt.Sprintf("%s was not called: the time ran out while waiting for a free call slot", c.Tool.Name)}
		}
		return Reply{Kind: Cancelled, Message: fmt.Sprintf("%s was not called: cancelled while waiting for a free call slot", c.Tool.Name)}
	}
	defer func() { <-l.slots }()
	return next(ctx)
}
