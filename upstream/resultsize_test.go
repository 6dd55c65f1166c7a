package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResultSizeIsMarshalled pins the size metered for a result (docs/design.md §19.9): the
// bytes json.Marshal makes of it, whatever resultSize does to get there. The results hold what
// json.Marshal would treat apart: HTML characters and U+2028 in strings, a map's keys out of
// order, _meta, no content at all, an error.
func TestResultSizeIsMarshalled(t *testing.T) {
	for _, res := range []*mcp.CallToolResult{
		{},
		{Content: []mcp.Content{}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "3"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "<b>&amp;</b> \u2028\u2029 \"quoted\" é \x01"}}},
		{StructuredContent: map[string]any{"sum": 5}, Content: []mcp.Content{&mcp.TextContent{Text: `{"sum":5}`}}},
		{StructuredContent: map[string]any{"z": []any{1.5, "<", nil, true}, "a": map[string]any{"&": json.RawMessage(` { "x" : 1 } `)}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{Data: []byte{0, 1, 2, 255}, MIMEType: "image/png"}}},
		{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}},
		{Meta: mcp.Meta{"trace": "<x>", "n": 1}, Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 5000)}}},
	} {
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultSize(res); got != len(want) {
			t.Errorf("resultSize = %d, want %d: %s", got, len(want), want)
		}
	}
}

// TestResultSizeThroughTheMock pins the sizes metered for the mock's answers, as they were
// when Invoke metered json.Marshal's bytes.
func TestResultSizeThroughTheMock(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	for _, c := range []struct {
		tool, args string
		size       int
	}{
		{"docs__add", `{"a":2,"b":3}`, 193},
		{"docs__lookup", `{"sku":"A"}`, 265},
		{"docs__list-repos", ``, 174},
		{"docs__mixed", ``, 219},
		{"docs__fail", ``, 189},
		{"docs__bytes", `{"n":1000}`, 1152},
	} {
		if r := call(t, turn, c.tool, c.args); r.Size != c.size {
			t.Errorf("%s: size %d, want %d", c.tool, r.Size, c.size)
		}
	}
}
