package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// What a host re-encodes of parsed JSON is JavaScript's JSON.stringify: the expectations are
// what Node 22 prints for JSON.stringify(JSON.parse(in)).
func TestHostJSONIsWhatJavaScriptWrites(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1.0,"b":1e+20,"c":1.5e-07,"d":-0.0,"e":0.000001,"f":123456789012345678901234}`: `{"a":1,"b":100000000000000000000,"c":1.5e-7,"d":0,"e":0.000001,"f":1.2345678901234569e+23}`,
		`[1e21,1e-7,0.1,2.5,-3,18446744073709551616,1e400]`:                                  `[1e+21,1e-7,0.1,2.5,-3,18446744073709552000,null]`,
		`{"s":"a<b>&\u2028\u2029\ufffd\\u2028\n\u0001\"é"}`:                                  "{\"s\":\"a<b>&\u2028\u2029\ufffd\\\\u2028\\n\\u0001\\\"é\"}",
	} {
		var v any
		d := json.NewDecoder(strings.NewReader(in))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if got := hostJSON(v); got != want {
			t.Errorf("%s\n got %s\nwant %s", in, got, want)
		}
	}
}

// A plain success reads as its value and its output; of the report only what is not as asked
// is there: guarantees below enforced, a level other than asked, a budget nearly spent. A
// refusal carries its failure, and no grades of a child that never ran.
func TestLeanSaysWhatIsNotAsAsked(t *testing.T) {
	all := engine.Guarantees{}
	for _, d := range engine.Dimensions {
		all[d] = engine.Enforced
	}
	terms := engine.Terms{Limits: engine.DefaultLimits, Isolation: engine.LevelProcess, Network: engine.NetworkNone}
	res := &execution.Result{Outcome: engine.Outcome{Value: json.RawMessage("42"), Stdout: "hi\n", StdoutSize: 3,
		Terms: terms, Isolation: engine.LevelProcess, Guarantees: all,
		Attachments: []outputs.Attachment{{Name: "stdout", ContentType: "text/plain", Size: 3, Location: "inline"}}}}
	if got := hostJSON(Lean(res, budget.Limits{MaxCalls: 200})); got != `{"value":42,"stdout":"hi\n"}` {
		t.Errorf("a plain success reads %s", got)
	}
	weaker := engine.Guarantees{}
	for d, g := range all {
		weaker[d] = g
	}
	weaker[engine.DimIdentity], weaker[engine.DimFilesystem] = engine.Unavailable, engine.Unverified
	res.Guarantees, res.Isolation = weaker, engine.LevelIsolated
	res.Budget.Run = budget.Usage{Calls: 170, TransferBytes: 10}
	got := hostJSON(Lean(res, budget.Limits{MaxCalls: 200, MaxTotalBytes: 1 << 20}))
	if want := `{"value":42,"stdout":"hi\n","isolation":"isolated","guarantees":{"filesystem":"unverified","identity":"unavailable"},"budget_left":{"calls":30}}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	text := RenderText(Lean(res, budget.Limits{MaxCalls: 200}))
	for _, want := range []string{"value: 42", "stdout:\nhi", "guarantees below enforced: filesystem unverified, identity unavailable",
		"isolation: asked for process, got isolated", "budget nearly spent, left for this run: calls 30"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	refused := &execution.Result{Outcome: *engine.Refuse(terms, failure.IsolationUnavailable, "no boundary here")}
	if got := hostJSON(Lean(refused, budget.Limits{})); got != `{"failure":{"kind":"isolation_unavailable","message":"no boundary here","executed":false}}` {
		t.Errorf("a refusal reads %s", got)
	}
	// A value too large to show whole is its head and tail, and the handle that keeps it.
	big := `"` + strings.Repeat("x", 100000) + `"`
	res = &execution.Result{Outcome: engine.Outcome{Value: json.RawMessage(big), Terms: terms, Isolation: engine.LevelProcess, Guarantees: all,
		Attachments: []outputs.Attachment{{Name: "value", Handle: "h_v", Size: int64(len(big)), Truncated: true, Location: "blob"}}}}
	m := Lean(res, budget.Limits{})
	if b := hostJSON(m); m.Value != nil || len(b) > 4500 || !strings.Contains(b, `"handle":"h_v"`) || !strings.Contains(b, "elided") {
		t.Errorf("a 100 kB value reads as %d bytes: %.300s", len(b), b)
	}
	if text := RenderText(m); !strings.Contains(text, "read_tool_output handle h_v") {
		t.Errorf("the text does not name the value's handle:\n%.300s", text)
	}
}

// A failed or cancelled program's calls are what the model reads, in the structured content
// and the text alike (with how many earlier ones are not shown); a completed program's are in
// the report only.
func TestLeanSaysWhatAlreadyHappened(t *testing.T) {
	person := binding.ApprovedByPerson
	calls := []binding.CallSummary{
		{Seq: 1, Tool: "crm__update", Outcome: binding.CallOK, ApprovedBy: &person},
		{Seq: 2, Tool: "crm__wipe", Outcome: binding.CallDenied, Kind: failure.Denied},
		{Seq: 3, Tool: "mail__send", Outcome: binding.CallError, Kind: failure.ToolError},
		{Seq: 4, Tool: "pay__charge", Outcome: binding.CallUnknown},
	}
	failed := &execution.Result{Outcome: engine.Outcome{Failure: &engine.Failure{Kind: failure.ProgramError, Message: "boom", Executed: true}},
		ToolCalls: calls, ToolCallsOmitted: 7}
	m := Lean(failed, budget.Limits{})
	if len(m.ToolCalls) != 4 || m.ToolCallsOmitted != 7 {
		t.Errorf("a failed result's lean form has tool_calls %+v (omitted %d)", m.ToolCalls, m.ToolCallsOmitted)
	}
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), `"tool_calls":[{"seq":1,"tool":"crm__update","outcome":"ok","approved_by":"person"},{"seq":2,"tool":"crm__wipe","outcome":"denied","kind":"denied","approved_by":null}`) {
		t.Errorf("tool_calls not in the shape fixed: %s", b)
	}
	text := ModelReads(failed, budget.Limits{})
	for _, want := range []string{"tool_calls (11, the first 7 not shown):\n", "  1 crm__update: ok, approved by person\n",
		"  2 crm__wipe: denied\n", "  3 mail__send: error (tool_error)\n", "  4 pay__charge: unknown"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text a model reads lacks %q:\n%s", want, text)
		}
	}
	completed := &execution.Result{ToolCalls: calls}
	if m := Lean(completed, budget.Limits{}); m.ToolCalls != nil {
		t.Errorf("a completed result's lean form lists its calls: %+v", m.ToolCalls)
	}
	if b, _ := json.Marshal(completed); !strings.Contains(string(b), `"tool_calls":[`) {
		t.Errorf("the report lacks tool_calls: %s", b)
	}
}
