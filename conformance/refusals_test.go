package conformance

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestRefusalLoopKeepsTheLedgerSmall: `mcp-sandbox run` with a program that loops on refused
// calls (a tool once the budget's one call is spent, arguments over max_argument_bytes, a
// tool needing an approval this host cannot ask) writes a bounded number of ledger records,
// and their times add up to exactly the refusals the program saw.
func TestRefusalLoopKeepsTheLedgerSmall(t *testing.T) {
	const n = 2000
	data := filepath.Join(t.TempDir(), "data")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %[2]q
`+processProfile+`    hard_limits: {wall_seconds: 90}
    binding_budget: {max_calls: 1, max_argument_bytes: 200}
upstreams:
  support: {command: [%[1]q]}
tenants:
  t:
    upstreams: [support]
    policy: {approval_required: ["support__add"]}
    agents:
      default:
        code_execution: {limits: {wall_seconds: 90}}
`, built.mock, data))
	program := fmt.Sprintf(`
await support__lookup(sku="A")
seen = {}
for i in range(%d):
    for call in (lambda: support__lookup(sku="B"), lambda: support__lookup(sku="x" * 500), lambda: support__add(a=1, b=2)):
        try:
            await call()
        except ToolError as e:
            key = e.tool + " " + e.kind
            seen[key] = seen.get(key, 0) + 1
return seen
`, n)
	out, errOut, code := sandboxCLI(t, program, "run", "--config", cfg, "-")
	var res struct {
		Value     map[string]int64 `json:"value"`
		Approvals struct {
			Unasked int64 `json:"unasked"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("run: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	want := map[string]int64{
		"support__lookup budget_exceeded":           n,
		"support__lookup argument_too_large":        n,
		"support__add approval_required_in_program": n,
	}
	if d := cmp.Diff(want, res.Value); d != "" || res.Approvals.Unasked != n {
		t.Fatalf("the program saw (-want +got):\n%s\nunasked approvals %d, want %d", d, res.Approvals.Unasked, n)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, sqlite.LedgerFile)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type tally struct{ Records, Times int64 }
	read := func(query string) map[string]tally {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]tally{}
		for rows.Next() {
			var k string
			var c tally
			if err := rows.Scan(&k, &c.Records, &c.Times); err != nil {
				t.Fatal(err)
			}
			got[k] = c
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	calls := read(`SELECT tool || ' ' || status || ' ' || kind, count(*), sum(times) FROM tool_calls GROUP BY 1`)
	approvals := read(`SELECT tool || ' ' || status, count(*), sum(times) FROM approvals GROUP BY 1`)
	r := budget.RecordedRefusals + 1 // one by one, and one summary
	wantCalls := map[string]tally{
		"support__lookup succeeded ":                 {1, 1},
		"support__lookup refused budget_exceeded":    {int64(r), n},
		"support__lookup refused argument_too_large": {int64(r), n},
	}
	if d := cmp.Diff(wantCalls, calls); d != "" {
		t.Errorf("tool_calls by tool, status and kind: records and their times (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]tally{"support__add unasked": {int64(r), n}}, approvals); d != "" {
		t.Errorf("approvals by tool and status: records and their times (-want +got):\n%s", d)
	}
}
