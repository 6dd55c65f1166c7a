package mcpserver

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/programs"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

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

// savedListing is a list_tools page with the saved programs offered beside its tools
// (docs/design.md §23): saved_programs in the structured content, a line each in the text.
func savedListing(page upstream.ListToolsPage, saved []programs.Summary) *mcp.CallToolResult {
	text := listToolsText(page) + "Saved programs (call them like tools; get_tool_info gives each one's stub):\n"
	for _, p := range saved {
		text += p.Name + ": " + p.Description + "\n"
	}
	return &mcp.CallToolResult{StructuredContent: struct {
		upstream.ListToolsPage
		SavedPrograms []programs.Summary `json:"saved_programs"`
	}{page, saved}, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
