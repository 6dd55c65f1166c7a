package configs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// approvals.state_key is one reference or a list [new, old]; each is checked like any
// credential reference, and a secret written in place is refused without being echoed.
func TestStateKey(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       StateKeys
		problem    string
	}{
		{"one", `approvals: {state_key: {env: K}}`, StateKeys{{Env: "K"}}, ""},
		{"rotation", "approvals: {state_key: [{env: NEW}, {file: /k/old}]}", StateKeys{{Env: "NEW"}, {File: "/k/old"}}, ""},
		{"absent", `approvals: {}`, nil, ""},
		{"in place", `approvals: {state_key: "c2VjcmV0"}`, nil, "approvals.state_key"},
		{"both", `approvals: {state_key: [{env: A, file: /b}]}`, nil, "approvals.state_key[0]"},
		{"unknown key", `approvals: {state_keys: {env: K}}`, nil, "approvals.state_keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(doc(c.yaml, "tenants: {t: {agents: {a: {}}}}"), "t.yaml")
			if c.problem != "" {
				if err == nil || !strings.Contains(err.Error(), c.problem) || strings.Contains(err.Error(), "c2VjcmV0") {
					t.Fatalf("error %v, want one naming %s and not the value", err, c.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, cfg.Approvals.StateKey); d != "" {
				t.Errorf("state_key (-want +got):\n%s", d)
			}
		})
	}
}
