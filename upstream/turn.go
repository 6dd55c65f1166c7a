package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// Spent is what one call of an upstream tool (Turn.Invoke) cost, beside its toolcall.Answer (the
// one type of a call's answer, from here to the program: Kind empty on success with Value the
// tool's value, docs/design.md §13.4 for the conversion; otherwise one of failure.CallKinds
// and a Message safe to show a model).
type Spent struct {
	// Size is the number of bytes the upstream produced for this call (its result, marshalled),
	// zero when it was not called; budget meters count it whether or not the value is delivered.
	Size int
	// Called is true when the upstream was reached, so recording knows a call was spent.
	Called bool
}

func refusal(k failure.Kind, format string, args ...any) *failure.Error {
	return failure.New(k, format, args...)
}

// Turn is the catalogue narrowed by a tenant's policy and an agent's bindings for one turn. It
// is immutable and safe for concurrent use.
type Turn struct {
	cat               *Catalogue
	granted           map[string]bool
	deny              []string
	approval          []string
	ignoreDestructive bool
	rules             []rule
	callable          map[string]*Tool // granted, not denied
	bound             map[string]*Tool // callable, narrowed by bindings: what a program may call
	names             []string         // sorted keys of bound
	unavailable       []string
}

// Problems maps each granted server with something wrong with its tools (it could not be
// listed, and why; tools were skipped or cut) to a sentence safe to show a model:
// Catalogue.Problems narrowed to the grant.
func (t *Turn) Problems() map[string]string {
	out := map[string]string{}
	for server, p := range t.cat.problems {
		if t.granted[server] {
			out[server] = p
		}
	}
	return out
}

// Resolve narrows c for one turn: grant names the servers the tenant is granted, deny and
// approval are globs over model-facing names, and bindings (nil: every callable tool) narrows
// what a program may call. Entries of bindings may be names or globs such as "docs__*". It is
// ResolvePolicy without argument rules, destructive hints counted.
func (c *Catalogue) Resolve(grant, deny, approval []string, bindings *[]string) *Turn {
	return c.ResolvePolicy(Policy{Grant: grant, Deny: deny, ApprovalRequired: approval, Bindings: bindings})
}

// ResolvePolicy narrows c for one turn by p.
func (c *Catalogue) ResolvePolicy(p Policy) *Turn {
	bindings := p.Bindings
	t := &Turn{
		cat:               c,
		granted:           map[string]bool{},
		deny:              append([]string(nil), p.Deny...),
		approval:          append([]string(nil), p.ApprovalRequired...),
		ignoreDestructive: p.IgnoreDestructive,
		rules:             compileRules(p.Rules),
		callable:          map[string]*Tool{},
		bound:             map[string]*Tool{},
	}
	for _, g := range p.Grant {
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
		if toolshape.Aliasable(n) {
			out = append(out, n)
		}
	}
	return out
}

// Unavailable returns the sorted entries of an explicit bindings list that resolve to no
// callable tool: the result's unavailable_bindings.
func (t *Turn) Unavailable() []string { return t.unavailable }

// ReadOnly reports whether nothing a program can call changes the world outside its sandbox:
// every tool it is bound to is read-only by its server's annotations (readOnlyHint) and needs
// no approval, and every granted server's tools are known (one that could not be listed may
// offer anything once it can). The built-ins a program calls are read-only.
func (t *Turn) ReadOnly() bool {
	if len(t.Problems()) > 0 {
		return false
	}
	for _, tool := range t.bound {
		if !ReadOnlyTool(tool) || t.NeedsApproval(tool) {
			return false
		}
	}
	return true
}

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

// Lookup finds the tool a call names, as the tenant's policy allows it: the name must be a
// tool of a granted server (else unavailable) that no deny glob matches (else denied) and that
// the catalogue does not hold as unavailable (else unavailable, with its reason). The agent's
// bindings (Bound) are a separate step, because a host's direct call skips them, and so is
// approval (Approval), which needs the call's arguments.
func (t *Turn) Lookup(name string) (*Tool, *failure.Error) {
	server, _, ok := SplitName(name)
	if !ok {
		return nil, refusal(failure.Unavailable, "no tool named %q", name)
	}
	tool, ok := t.cat.byName[name]
	if !ok || !t.granted[server] {
		if p, bad := t.cat.problems[server]; bad && t.granted[server] {
			return nil, refusal(failure.Unavailable, "no tool named %q is available: %s", name, p)
		}
		return nil, refusal(failure.Unavailable, "no tool named %q is available", name)
	}
	if matchAny(t.deny, name) {
		return nil, refusal(failure.Denied, "%s is denied by this tenant's policy", name)
	}
	if tool.Unavailable != "" {
		return nil, refusal(failure.Unavailable, "%s is unavailable: %s", name, tool.Unavailable)
	}
	return tool, nil
}

// Server returns the granted server a name belongs to, or "" when it names none: a name a
// program made up never becomes a metrics label.
func (t *Turn) Server(name string) string {
	if server, _, ok := SplitName(name); ok && t.granted[server] {
		return server
	}
	return ""
}

// Bound reports whether a program of this turn may call tool: it is among the agent's bindings.
func (t *Turn) Bound(tool *Tool) bool { return t.bound[tool.Name] != nil }

// Arguments checks args (a JSON object; empty or null means {}) against tool's input schema
// and returns the bytes to send, as sent. A mismatch is invalid_arguments.
func (tool *Tool) Arguments(args json.RawMessage) (json.RawMessage, *failure.Error) {
	return tool.arguments(args, false)
}

// BindingArguments is Arguments for a program's call: the keywords are checked first against
// the binding's Signature (exactly those it takes, every required one present), as the
// program's own binding checked them, so a program that skipped its side is refused the same.
func (tool *Tool) BindingArguments(args json.RawMessage) (json.RawMessage, *failure.Error) {
	return tool.arguments(args, true)
}

func (tool *Tool) arguments(args json.RawMessage, keywords bool) (json.RawMessage, *failure.Error) {
	obj, canon, err := toolshape.ArgumentObject(args)
	if err != nil {
		return nil, refusal(failure.InvalidArguments, "arguments for %s: %v", tool.Name, err)
	}
	if keywords {
		if fe := tool.CheckKeywords(obj); fe != nil {
			return nil, fe
		}
	}
	if err := tool.CheckArguments(obj); err != nil {
		return nil, refusal(failure.InvalidArguments, "arguments for %s %s", tool.Name, toolshape.Clip(err.Error(), 600))
	}
	return canon, nil
}

// Invoke calls tool on its upstream server with args (already checked by Arguments). It is
// the one place a binding call reaches an upstream; every failure is an Answer, never replayed.
func (t *Turn) Invoke(ctx context.Context, tool *Tool, args json.RawMessage) (a toolcall.Answer, spent Spent) {
	ctx, span := startCall(ctx, tool)
	defer func() { span.End(string(a.Kind)) }()
	res, err := t.cat.pool.conns[tool.Server].link.call(ctx, tool.Upstream, args)
	var (
		notSent *notSentError
		cred    *CredentialError
	)
	switch {
	case err == nil:
	case errors.As(err, &cred) && cred.Reason != "":
		// No token could be had, or the server refused the one sent and a renewed one: the
		// tool did not run, so nothing was spent.
		telemetry.Logger(ctx, t.cat.pool.logger).Warn("upstream credential failed", "server", tool.Server, "tool", tool.Upstream, "err", redactErr(err))
		return toolcall.Answer{Kind: failure.UpstreamError, Message: fmt.Sprintf("the upstream server %q was not called for %s: its credential is not available: %s", tool.Server, tool.Name, cred.Reason)}, Spent{}
	case errors.As(err, &notSent):
		// No session could be had, so the server never saw the call: nothing was spent.
		if errors.Is(err, context.DeadlineExceeded) {
			return toolcall.Answer{Kind: failure.Timeout, Message: fmt.Sprintf("%s was not called: the time ran out while connecting to %q", tool.Name, tool.Server)}, Spent{}
		}
		if errors.Is(err, context.Canceled) {
			return toolcall.Answer{Kind: failure.Cancelled, Message: fmt.Sprintf("%s was not called: cancelled while connecting to %q", tool.Name, tool.Server)}, Spent{}
		}
		telemetry.Logger(ctx, t.cat.pool.logger).Warn("upstream connect failed", "server", tool.Server, "tool", tool.Upstream, "err", redactErr(err))
		return toolcall.Answer{Kind: failure.UpstreamError, Message: fmt.Sprintf("the upstream server %q could not be reached for the call of %s; it was not called", tool.Server, tool.Name)}, Spent{}
	case errors.Is(err, errCallTimeout) || errors.Is(err, context.DeadlineExceeded):
		return toolcall.Answer{Kind: failure.Timeout, Message: fmt.Sprintf("%s did not answer in time", tool.Name)}, Spent{Called: true}
	case errors.Is(err, context.Canceled):
		return toolcall.Answer{Kind: failure.Cancelled, Message: fmt.Sprintf("the call of %s was cancelled", tool.Name)}, Spent{Called: true}
	case tooDeep(err):
		// The go-sdk's decoder goes 1,000 levels deep; a program's JSON decoder less deep still.
		return toolcall.Answer{Kind: failure.InvalidResult,
			Message: fmt.Sprintf("the answer of %s nests deeper than the %d levels an answer may; it was not handed over", tool.Name, maxFrameDepth)}, Spent{Called: true, Size: int(max(frameTooLarge(err), 0))}
	case frameTooLarge(err) >= 0:
		// Read and dropped at the transport (stdioconn.go): metered as produced, never kept.
		n := frameTooLarge(err)
		telemetry.Logger(ctx, t.cat.pool.logger).Warn("upstream answer over the frame bound", "server", tool.Server, "tool", tool.Upstream, "bytes", n)
		return toolcall.Answer{Kind: failure.UpstreamError,
			Message: fmt.Sprintf("the answer of %s was %d bytes, over the %d an answer from an upstream may be; it was refused (ask it for less: a page, a filter)",
				tool.Name, n, t.cat.pool.conns[tool.Server].srv.maxFrame())}, Spent{Called: true, Size: int(n)}
	default:
		telemetry.Logger(ctx, t.cat.pool.logger).Warn("upstream call failed", "server", tool.Server, "tool", tool.Upstream, "err", redactErr(err))
		return toolcall.Answer{Kind: failure.UpstreamError, Message: fmt.Sprintf("the upstream server %q failed to answer the call of %s; it was not retried", tool.Server, tool.Name)}, Spent{Called: true}
	}
	spent = Spent{Size: resultSize(res), Called: true}
	if res.IsError {
		a = toolcall.Answer{Kind: failure.ToolError, Message: toolshape.Clip(resultText(res), 4000)}
		if a.Message == "" {
			a.Message = tool.Name + " reported an error without text"
		}
		return a, spent
	}
	v, err := resultValue(res)
	if err != nil {
		return toolcall.Answer{Kind: failure.UpstreamError, Message: fmt.Sprintf("the result of %s could not be encoded", tool.Name)}, spent
	}
	t.observations().observe(tool, v)
	return toolcall.Answer{Value: v}, spent
}

// resultSize is the size metered for res: the bytes of json.Marshal(res), 0 when it fails.
// It calls the result's own MarshalJSON, whose bytes json.Marshal would only compact and copy
// again (they are compact and HTML-escaped already), to the same length (docs/design.md §19.9).
func resultSize(res *mcp.CallToolResult) int {
	raw, err := res.MarshalJSON()
	if err != nil {
		return 0
	}
	return len(raw)
}

// observations are what the turn's Pool (its tenant) learned of result shapes; nil without one.
func (t *Turn) observations() *observations {
	if t.cat.pool == nil {
		return nil
	}
	return &t.cat.pool.observed
}

// resultValue converts a result as docs/design.md §3.5 says: structuredContent when present; the
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

// frameTooLarge returns the size of the answer err stands for when it is the transport's
// refusal of a frame over its bound or too deep (codeFrameTooLarge, codeFrameTooDeep), else -1.
func frameTooLarge(err error) int64 {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || (we.Code != codeFrameTooLarge && we.Code != codeFrameTooDeep) {
		return -1
	}
	var d struct {
		Bytes int64 `json:"bytes"`
	}
	_ = json.Unmarshal(we.Data, &d)
	return max(d.Bytes, 0)
}

// tooDeep reports whether err says the answer nested too deep to decode: the stdio reader's
// refusal (codeFrameTooDeep), or the go-sdk decoder's own over HTTP, which has no error value
// to match (its package is internal), so its text is.
func tooDeep(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code == codeFrameTooDeep {
		return true
	}
	return strings.Contains(err.Error(), "exceeded maximum nesting depth")
}
