package upstream

import (
	"encoding/json"
	"sort"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// Separator joins a server's name and a tool's name into the model-facing name.
const Separator = "__"

// Tool is one upstream tool in the catalogue. Its fields must not be modified.
type Tool struct {
	// Name is the model-facing name, "<server>__<tool>".
	Name string
	// Server and Upstream are the server's name and the tool's name on that server.
	Server, Upstream string
	// Deferred is true when the server is deferred.
	Deferred bool
	// Destructive is true when the server annotated the tool destructiveHint=true.
	Destructive bool
	// Def is the definition the server sent, as admitted: description and title cut to
	// their bounds, _meta and icons dropped, an over-large output schema dropped.
	Def *mcp.Tool
	// Unavailable, when not empty, says why the tool cannot be called (a sentence safe to
	// show a model): it is listed with the reason, but is not among a program's names, not
	// exposed to hosts, and a call is refused as unavailable.
	Unavailable string

	input  *toolshape.Input  // nil: any keyword, nothing validated or hidden by schema
	output *toolshape.Schema // the declared output schema's model; nil: none
	digest string            // sha256 of Def as admitted: what observed result shapes belong to
}

// CheckArguments checks a call's decoded arguments against the tool's input schema, within
// the validator's bounds (toolshape.Input.Check). The error is a phrase safe to show a model
// that completes "arguments for <tool> ...".
func (t *Tool) CheckArguments(args map[string]any) error { return t.input.Check(args) }

// RedactArguments renders args (a call's JSON arguments) as a person or a log line may see
// them, at most max bytes (toolshape.Redact, docs/design.md §13.3). t may be nil: a tool not
// known, whose schema hides nothing.
func (t *Tool) RedactArguments(args json.RawMessage, max int) string {
	return toolshape.Redact(t.inputSchema(), args, max)
}

// ApprovalView renders args as the person asked to approve the call reads them, or says why
// it cannot (toolshape.ApprovalView): view is "" and why completes "a question could not show
// its arguments: ..." when it cannot.
func (t *Tool) ApprovalView(args json.RawMessage, max int) (view, why string) {
	return toolshape.ApprovalView(t.inputSchema(), args, max)
}

// HostInputSchema returns the tool's input schema as a host's tools/list shows it, and
// whether a host may be shown the tool: MCP admits only an input schema of type "object".
func (t *Tool) HostInputSchema() (json.RawMessage, bool) { return t.input.ForHosts() }

func (t *Tool) inputSchema() *toolshape.Schema {
	if t == nil {
		return nil
	}
	return t.input.Schema()
}

// Alias returns t's alias, or "" when it has none.
func (t *Tool) Alias() string {
	if toolshape.Aliasable(t.Name) {
		return t.Name
	}
	return ""
}

// Summary returns the first line of t's description, at most 200 bytes, with no control
// character: what a one-line-per-tool rendering shows, so a description cannot forge a line
// of its own. Every line break ends the line (\r, \v, \f, NEL, U+2028 and U+2029 too).
func (t *Tool) Summary() string {
	d := strings.TrimSpace(t.Def.Description)
	if i := strings.IndexFunc(d, toolshape.IsLineBreak); i >= 0 {
		d = strings.TrimSpace(d[:i])
	}
	d = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, d)
	if len(d) > 200 {
		cut := 197
		for cut > 0 && !isRuneStart(d[cut]) {
			cut--
		}
		d = d[:cut] + "..."
	}
	return d
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// ModelName returns the model-facing name of tool on server.
func ModelName(server, tool string) string { return server + Separator + tool }

// SplitName splits a model-facing name at its first "__".
func SplitName(name string) (server, tool string, ok bool) {
	return strings.Cut(name, Separator)
}

// Catalogue is a snapshot of every tool of a Pool's servers, sorted by name. It is immutable.
type Catalogue struct {
	pool     *Pool
	tools    []*Tool
	byName   map[string]*Tool
	problems map[string]string
}

// Tools returns every tool, sorted by name. The slice must not be modified.
func (c *Catalogue) Tools() []*Tool { return c.tools }

// Bindable returns every tool a program may bind, deferred servers included: all of them.
func (c *Catalogue) Bindable() []*Tool { return c.tools }

// Exposed returns the tools of non-deferred servers, the ones a host may see directly.
func (c *Catalogue) Exposed() []*Tool {
	var out []*Tool
	for _, t := range c.tools {
		if !t.Deferred {
			out = append(out, t)
		}
	}
	return out
}

// Lookup returns the tool with model-facing name name.
func (c *Catalogue) Lookup(name string) (*Tool, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// Problems maps a server that could not be listed to a sentence safe to show a model. A server
// listed before keeps its last known tools.
func (c *Catalogue) Problems() map[string]string { return c.problems }

func newCatalogue(p *Pool, tools []*Tool, problems map[string]string) *Catalogue {
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	c := &Catalogue{pool: p, tools: tools, byName: make(map[string]*Tool, len(tools)), problems: problems}
	for _, t := range tools {
		c.byName[t.Name] = t
	}
	return c
}
