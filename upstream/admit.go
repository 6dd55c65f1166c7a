package upstream

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// Bounds on what one server's tools/list may put in the catalogue. An upstream is untrusted:
// pages of tools with megabyte descriptions, re-listed on every list_changed, must not make
// the catalogue hold gigabytes, and a name or description must not forge what the model reads.
// What is cut is said in the catalogue's Problems (the operator's log and list_tools).
const (
	// maxNameBytes is the MCP tool-name rule's bound, applied to the model-facing name
	// "<server>__<tool>", which is what crosses MCP to hosts.
	maxNameBytes = 128
	// maxDescriptionBytes and maxTitleBytes bound what is kept of a tool's description and
	// title; longer ones are cut at a character boundary and marked.
	maxDescriptionBytes = 16 << 10
	maxTitleBytes       = 256
	// maxOutputSchemaBytes bounds a kept output schema; a larger one is dropped (it only
	// informs), while an input schema over toolshape.MaxSchemaBytes makes the tool unavailable.
	maxOutputSchemaBytes = 64 << 10
	// maxToolsPerServer and maxServerBytes bound one server's kept tools and their bytes.
	maxToolsPerServer = 1000
	maxServerBytes    = 8 << 20
	// maxListPages and maxListBytes bound one listing: pages read, and bytes of tool
	// definitions received. A listing past either keeps what it had and says so.
	maxListPages = 100
	maxListBytes = 32 << 20
)

// validToolName reports whether an upstream tool named name on server may enter the
// catalogue: the MCP tool-name rules (1–128 characters of A-Z a-z 0-9 _ - .), applied to the
// model-facing name, so nothing but those characters reaches a line the model reads.
func validToolName(server, name string) bool {
	if name == "" || len(ModelName(server, name)) > maxNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// listing is what one tools/list gave, before admission.
type listing struct {
	defs []*mcp.Tool
	cut  string // why the listing stopped early, "" when it ended
}

// admit turns a server's listing into catalogue entries within the bounds above, and returns
// the sentences (safe to show a model) saying what was skipped or cut.
func admit(s Server, l listing, logger *slog.Logger) ([]*Tool, []string) {
	var (
		tools                      []*Tool
		notes                      []string
		badNames                   []string
		nBad, dups, over, overSize int
		kept                       int
		shortened                  int
	)
	seen := map[string]bool{}
	for _, d := range l.defs {
		switch {
		case d == nil:
			continue
		case !validToolName(s.Name, d.Name):
			nBad++
			if len(badNames) < 3 {
				badNames = append(badNames, fmt.Sprintf("%q", toolshape.Clip(d.Name, 40)))
			}
			continue
		case seen[d.Name]:
			dups++
			continue
		case len(tools) == maxToolsPerServer:
			over++
			continue
		}
		seen[d.Name] = true
		def, cut := trimDef(d)
		if cut {
			shortened++
		}
		t := newTool(s, def, logger) // drops an input schema over its bound before it is counted
		size := defBytes(t.Def)
		if kept+size > maxServerBytes {
			overSize++
			continue
		}
		kept += size
		tools = append(tools, t)
	}
	if nBad > 0 {
		notes = append(notes, fmt.Sprintf("skipped %s whose names break the MCP rules (1 to %d characters of letters, digits, '_', '-' and '.', the server's name and \"__\" included): %s",
			nTools(nBad), maxNameBytes, strings.Join(badNames, ", ")))
	}
	if dups > 0 {
		notes = append(notes, fmt.Sprintf("skipped %s listed twice", nTools(dups)))
	}
	if over > 0 {
		notes = append(notes, fmt.Sprintf("skipped %s: a server may offer at most %d", nTools(over), maxToolsPerServer))
	}
	if overSize > 0 {
		notes = append(notes, fmt.Sprintf("skipped %s: the server's tool definitions passed %d bytes", nTools(overSize), maxServerBytes))
	}
	if shortened > 0 {
		notes = append(notes, fmt.Sprintf("shortened %s: descriptions are kept to %d bytes, titles to %d, output schemas to %d",
			nTools(shortened), maxDescriptionBytes, maxTitleBytes, maxOutputSchemaBytes))
	}
	if l.cut != "" {
		notes = append(notes, l.cut)
	}
	if len(notes) > 0 {
		logger.Warn("upstream tools cut from the catalogue", "server", s.Name, "notes", strings.Join(notes, "; "))
	}
	return tools, notes
}

func nTools(n int) string {
	if n == 1 {
		return "1 tool"
	}
	return fmt.Sprintf("%d tools", n)
}

// trimDef returns the part of d the catalogue keeps, and whether anything was cut.
func trimDef(d *mcp.Tool) (*mcp.Tool, bool) {
	def := &mcp.Tool{Name: d.Name, Annotations: d.Annotations, InputSchema: d.InputSchema, OutputSchema: d.OutputSchema}
	var cut bool
	def.Description, cut = cutText(cleanText(d.Description), maxDescriptionBytes)
	var c2 bool
	def.Title, c2 = cutText(strings.Map(noControl, d.Title), maxTitleBytes)
	cut = cut || c2
	if a := d.Annotations; a != nil && (len(a.Title) > maxTitleBytes || strings.IndexFunc(a.Title, unicode.IsControl) >= 0) {
		copied := *a
		copied.Title, _ = cutText(strings.Map(noControl, a.Title), maxTitleBytes)
		def.Annotations, cut = &copied, true
	}
	if d.OutputSchema != nil {
		if b, err := json.Marshal(d.OutputSchema); err != nil || len(b) > maxOutputSchemaBytes {
			def.OutputSchema, cut = nil, true
		}
	}
	return def, cut
}

// cleanText normalises line ends to "\n" and drops every other control character but tab.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r' || toolshape.IsLineBreak(r):
			return '\n'
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
}

func noControl(r rune) rune {
	if unicode.IsControl(r) {
		return ' '
	}
	return r
}

// cutText keeps at most n bytes of s (at a character boundary), marking a cut.
func cutText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	mark := fmt.Sprintf(" [… %d bytes cut]", len(s)-n)
	keep := n - len(mark)
	for keep > 0 && !isRuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + mark, true
}

// defBytes approximates what a kept definition holds in memory: its JSON size.
func defBytes(d *mcp.Tool) int {
	n := len(d.Name) + len(d.Title) + len(d.Description)
	for _, v := range []any{d.InputSchema, d.OutputSchema, d.Annotations} {
		if v != nil {
			if b, err := json.Marshal(v); err == nil {
				n += len(b)
			}
		}
	}
	return n
}

// newTool builds the catalogue entry for def on server s: its schemas read once
// (toolshape.ReadInput, toolshape.ParseSchema), the input's compiled to validate arguments.
func newTool(s Server, def *mcp.Tool, logger *slog.Logger) *Tool {
	t := &Tool{
		Name:     ModelName(s.Name, def.Name),
		Server:   s.Name,
		Upstream: def.Name,
		Deferred: s.Deferred,
		Def:      def,
	}
	defer func() { t.digest = defDigest(def) }() // def as finally admitted
	if a := def.Annotations; a != nil && a.DestructiveHint != nil && *a.DestructiveHint {
		t.Destructive = true
	}
	if def.OutputSchema != nil {
		if b, err := json.Marshal(def.OutputSchema); err == nil { // trimDef kept it only if it is JSON
			t.output = toolshape.ParseSchema(b)
		}
	}
	if def.InputSchema == nil {
		return t
	}
	b, err := json.Marshal(def.InputSchema)
	if err != nil {
		logger.Warn("upstream input schema not usable; arguments go unvalidated", "server", s.Name, "tool", def.Name, "err", err)
		return t
	}
	if len(b) > toolshape.MaxSchemaBytes {
		t.Unavailable = fmt.Sprintf("its input schema is %d bytes, over the %d this host accepts", len(b), toolshape.MaxSchemaBytes)
		def.InputSchema = nil // not kept
		logger.Warn("upstream tool unavailable", "server", s.Name, "tool", def.Name, "reason", t.Unavailable)
		return t
	}
	in, unavailable, err := toolshape.ReadInput(b)
	switch {
	case unavailable != "":
		t.Unavailable = unavailable
		logger.Warn("upstream tool unavailable", "server", s.Name, "tool", def.Name, "reason", unavailable)
	case err != nil:
		logger.Warn("upstream input schema not usable; arguments go unvalidated", "server", s.Name, "tool", def.Name, "err", err)
	}
	t.input = in
	return t
}
