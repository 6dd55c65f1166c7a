package conformance

import (
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
	b, err := structured(res, &host)
	if err != nil || res.IsError {
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

// TestBudgetRemaining: a program reads what is left of its execution's and its Run's binding
// budgets with await budget.remaining(): calls, transfer and produced bytes count down as it
// calls, asking spends nothing, seconds is what is left of its wall clock, and a second
// execution of the same Run sees the Run's budget as the first left it.
func TestBudgetRemaining(t *testing.T) {
	dir := t.TempDir()
	cfg := budgetConfig(filepath.Join(dir, "data"), filepath.Join(dir, "counter.json"),
		"{max_calls: 10, max_total_bytes: 100000, max_produced_bytes: 100000}", "")
	cs, _ := serve(t, cfg, nil)
	type left struct {
		Calls         *int64   `json:"calls"`
		TransferBytes *int64   `json:"transfer_bytes"`
		ProducedBytes *int64   `json:"produced_bytes"`
		Seconds       *float64 `json:"seconds"`
	}
	type both struct{ Execution, Run left }
	var got []both
	code := `
out = [await budget.remaining(), await budget.remaining()]
await support__lookup(sku="A")
await support__lookup(sku="B")
out.append(await budget.remaining())
return out
`
	run(t, cs, code, &got)
	if len(got) != 3 {
		t.Fatalf("got %+v", got)
	}
	a, b, c := got[0], got[1], got[2]
	if a.Execution.Calls == nil || *a.Execution.Calls != 10 || *b.Execution.Calls != 10 || *c.Execution.Calls != 8 {
		t.Errorf("execution calls left: %v %v %v, want 10 10 8", deref(a.Execution.Calls), deref(b.Execution.Calls), deref(c.Execution.Calls))
	}
	if c.Run.Calls == nil || *c.Run.Calls != 8 {
		t.Errorf("run calls left = %v, want 8", deref(c.Run.Calls))
	}
	if *c.Execution.TransferBytes >= *a.Execution.TransferBytes || *c.Execution.ProducedBytes >= *a.Execution.ProducedBytes {
		t.Errorf("bytes left did not fall: %+v then %+v", a.Execution, c.Execution)
	}
	if a.Execution.Seconds == nil || *a.Execution.Seconds <= 0 || *a.Execution.Seconds > 90 || a.Run.Seconds != nil {
		t.Errorf("seconds left: execution %v, run %v; want (0, 90] and none", deref(a.Execution.Seconds), deref(a.Run.Seconds))
	}
	// The same session is the same Run: the next execution starts with a fresh execution
	// budget and the Run's as the first left it.
	run(t, cs, `return [await budget.remaining()]`, &got)
	if len(got) != 1 || *got[0].Execution.Calls != 10 || *got[0].Run.Calls != 8 {
		t.Errorf("second execution: %+v, want execution calls 10, run calls 8", got)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
