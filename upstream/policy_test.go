package upstream

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

func policyCatalogue() *Catalogue {
	tool := func(name string, destructive bool, schema string) *Tool {
		server, up, _ := SplitName(name)
		t := newTool(Server{Name: server}, &mcp.Tool{Name: up, InputSchema: json.RawMessage(schema)}, slog.New(slog.DiscardHandler))
		t.Destructive = destructive
		return t
	}
	return newCatalogue(nil, []*Tool{
		tool("gh__create_issue", false, `{"type":"object"}`),
		tool("gh__list", false, `{"type":"object"}`),
		tool("gh__wipe", true, `{"type":"object"}`),
		tool("db__query", false, `{"type":"object","properties":{"dsn":{"type":"string","format":"password"},"opts":{"type":"object","properties":{"key":{"writeOnly":true}}}}}`),
	}, map[string]string{})
}

// TestApprovalRules: argument rules deny or ask for approval per value; globs and destructive
// hints ask by name; passing a rule lifts nothing.
func TestApprovalRules(t *testing.T) {
	cat := policyCatalogue()
	p := Policy{
		Grant:            []string{"gh", "db"},
		ApprovalRequired: []string{"gh__list"},
		Rules: []Rule{
			{Tool: "gh__*", Argument: "repo", Allow: []string{"acme/web", "acme/api"}, Otherwise: RuleDeny},
			{Tool: "gh__create_issue", Argument: "labels", Pattern: `[a-z-]+`, Otherwise: RuleApproval},
			{Tool: "gh__list", Argument: "meta.page", Allow: []string{"1", "2", "true"}, Otherwise: RuleApproval},
		},
	}
	turn := cat.ResolvePolicy(p)
	tests := []struct {
		tool, args string
		deny       bool
		reasons    int
	}{
		{"gh__create_issue", `{"repo":"acme/web","labels":["bug","ui-fix"]}`, false, 0},
		{"gh__create_issue", `{"repo":"acme/web","labels":[]}`, false, 1}, // empty: allows nothing
		{"gh__create_issue", `{"repo":[],"labels":["bug"]}`, true, 0},     // repo: [] never reaches the upstream
		{"gh__create_issue", `{"repo":"acme/web","labels":["Bug"]}`, false, 1},
		{"gh__create_issue", `{"repo":"acme/web","labels":[["bug"]]}`, false, 1},
		{"gh__create_issue", `{"repo":"acme/web"}`, false, 1}, // absent: not allowed
		{"gh__create_issue", `{"repo":"evil/x","labels":["bug"]}`, true, 0},
		{"gh__create_issue", `{"repo":null,"labels":["bug"]}`, true, 0},
		{"gh__create_issue", `{"repo":{"a":1},"labels":["bug"]}`, true, 0},
		{"gh__create_issue", `{"labels":["bug"]}`, true, 0},
		{"gh__list", `{"repo":"acme/api","meta":{"page":2}}`, false, 1},    // the glob still asks
		{"gh__list", `{"repo":"acme/api","meta":{"page":2.0}}`, false, 2},  // a number as written
		{"gh__list", `{"repo":"acme/api","meta":{"page":true}}`, false, 1}, // a boolean's text
		{"gh__wipe", `{"repo":"acme/api"}`, false, 1},                      // destructive
		{"db__query", `{}`, false, 0},
	}
	for _, tc := range tests {
		tool, fe := turn.Lookup(tc.tool)
		if fe != nil {
			t.Fatalf("Lookup(%s): %v", tc.tool, fe)
		}
		reasons, fe := turn.Approval(tool, json.RawMessage(tc.args))
		if tc.deny {
			if fe == nil || fe.Kind != failure.Denied || strings.Contains(fe.Message, "evil") {
				t.Errorf("%s %s: %v, %v; want denied without echoing the value", tc.tool, tc.args, reasons, fe)
			}
			continue
		}
		if fe != nil || len(reasons) != tc.reasons {
			t.Errorf("%s %s: reasons %q, %v; want %d reasons", tc.tool, tc.args, reasons, fe, tc.reasons)
		}
	}
	for name, want := range map[string]bool{"gh__create_issue": true, "gh__list": true, "gh__wipe": true, "db__query": false} {
		tool, _ := turn.Lookup(name)
		if got := turn.NeedsApproval(tool); got != want {
			t.Errorf("NeedsApproval(%s) = %v, want %v", name, got, want)
		}
	}
	// destructive_needs_approval: false ignores the hint, and only the hint.
	p.IgnoreDestructive = true
	turn = cat.ResolvePolicy(p)
	tool, _ := turn.Lookup("gh__wipe")
	if reasons, fe := turn.Approval(tool, json.RawMessage(`{"repo":"acme/web"}`)); fe != nil || len(reasons) != 0 || turn.NeedsApproval(tool) {
		t.Errorf("wipe with destructive hints ignored: %q %v", reasons, fe)
	}
	// A pattern that does not compile allows nothing: a rule fails closed.
	turn = cat.ResolvePolicy(Policy{Grant: []string{"gh"}, Rules: []Rule{{Tool: "gh__list", Argument: "q", Pattern: "(", Otherwise: RuleDeny}}})
	tool, _ = turn.Lookup("gh__list")
	if _, fe := turn.Approval(tool, json.RawMessage(`{"q":"("}`)); fe == nil {
		t.Errorf("a broken pattern allowed a value")
	}
}

// TestRedactArguments: one redaction rule for people and logs.
func TestRedactArguments(t *testing.T) {
	cat := policyCatalogue()
	tool, _ := cat.Lookup("db__query")
	args := `{"sql":"select 1","dsn":"postgres://u:pw@h/db","opts":{"key":"k1","depth":2},` +
		`"api_key":"AKIA","Authorization":"Bearer x","note":"see https://u:p@x.example/a?token=t#f now",` +
		`"long":"` + strings.Repeat("é", 300) + `","n":12.50}`
	got := tool.RedactArguments(json.RawMessage(args), 4000)
	for _, secret := range []string{"pw@", "k1", "AKIA", "Bearer x", "u:p@", "token=t", "#f"} {
		if strings.Contains(got, secret) {
			t.Errorf("redacted arguments show %q: %s", secret, got)
		}
	}
	for _, kept := range []string{`"sql":"select 1"`, `"depth":2`, "https://x.example/a now", `"n":12.50`, "(600 bytes)"} {
		if !strings.Contains(got, kept) {
			t.Errorf("redacted arguments lack %q: %s", kept, got)
		}
	}
	if short := tool.RedactArguments(json.RawMessage(args), 40); len(short) > 40+len("…") || !strings.HasSuffix(short, "…") {
		t.Errorf("bounded to 40: %q", short)
	}
	if got := tool.RedactArguments(json.RawMessage(`{not json`), 100); strings.Contains(got, "not json") {
		t.Errorf("non-JSON arguments shown: %q", got)
	}
}
