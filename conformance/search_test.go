package conformance

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestListToolsRanked: on scenario B's catalogue of 351 deferred tools, described here by what
// each would do (19 verbs on 19 nouns, each pair once, so "Refunds orders." is one tool among
// others that refund something else or do something else to orders), list_tools(query="refund
// order") returns the order-refunding tool first, with scores best first and how many matched,
// from the host and from a program alike.
func TestListToolsRanked(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
data_dir: %[2]q
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true}
upstreams:
  support: {command: [%[1]q]}
  big:     {command: [%[1]q, "--many", "351", "--page-size", "40", "--described"], deferred: true}
tenants:
  t:
    upstreams: [support, big]
    agents:
      default: {code_execution: {}}
`, built.mock, filepath.Join(dir, "data"))
	cs, _ := serve(t, cfg, nil)
	type page struct {
		Tools []struct {
			Name        string   `json:"name"`
			Description string   `json:"description"`
			Deferred    bool     `json:"deferred"`
			Score       *float64 `json:"score"`
		} `json:"tools"`
		Matched    *int   `json:"matched"`
		NextCursor string `json:"next_cursor"`
	}
	check := func(from string, p page) {
		t.Helper()
		if len(p.Tools) == 0 || p.Tools[0].Name != "big__tool-0157" || !p.Tools[0].Deferred ||
			!strings.HasPrefix(p.Tools[0].Description, "Refunds orders.") {
			t.Fatalf("%s: list_tools(query=\"refund order\") does not put the order-refunding tool first: %+v", from, p)
		}
		if p.Matched == nil || *p.Matched < len(p.Tools) || *p.Matched < 2 {
			t.Errorf("%s: matched = %v for a page of %d", from, p.Matched, len(p.Tools))
		}
		for i, tl := range p.Tools {
			if tl.Score == nil || *tl.Score <= 0 || i > 0 && *tl.Score > *p.Tools[i-1].Score {
				t.Errorf("%s: scores are not given best first: %+v", from, p.Tools)
				break
			}
		}
		// The others that match share a word: they refund something else, or act on orders.
		for _, tl := range p.Tools[1:] {
			if d := strings.ToLower(tl.Description); !strings.Contains(d, "refund") && !strings.Contains(d, "order") {
				t.Errorf("%s: %s matched without either word: %q", from, tl.Name, tl.Description)
			}
		}
	}
	res := call(t, cs, "list_tools", map[string]any{"query": "refund order"})
	var host page
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &host); err != nil || res.IsError {
		t.Fatalf("list_tools: %v %s", err, b)
	}
	check("host", host)
	if txt := texts(res); !strings.HasPrefix(txt, fmt.Sprintf("%d tools match, best first", *host.Matched)) || !strings.Contains(txt, "big__tool-0157 [") {
		t.Errorf("the text the model reads does not rank:\n%s", txt)
	}
	var prog page
	run(t, cs, `return await list_tools(query="refund order")`, &prog)
	check("program", prog)
}
