package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestApprovalsCommand (must show 6, the command's side): `approvals list` shows each pending,
// unexpired approval with its tenant, tool and the arguments as the person was shown them, in
// full (as text and JSON; issue 38: a value's tail past 200 bytes is there), and one kept
// without them with why, which approve refuses;
// `approve ID` decides it once, recorded with who decided; a second decision, an expired one
// and an unknown ID are refused with the reason (exit 1); without a shared ledger it is a
// configuration error (exit 2). The server's side (the decision releases the program) is in
// conformance.
func TestApprovalsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := testkit.WriteConfig(t, fmt.Sprintf("data_dir: %q\ntenants: {acme: {agents: {default: {}}}}\n", dir))
	led, err := sqlite.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sql := `"DELETE FROM orders WHERE id IN (` + strings.Repeat("7, ", 100) + `8); DROP TABLE users"`
	view := "  id = 7\n  sql = " + sql + "\n  api_key = [redacted]\nNot shown: api_key (the tool's schema marks it writeOnly)\n"
	for _, p := range []budget.Pause{
		{ID: "q_open", Tenant: "acme", Agent: "default", Hold: "h_1", Tool: "crm__wipe", Arguments: `{"api_key":"[redacted]","id":7,"sql":"DELETE…"}`,
			View: view, Reason: "crm__wipe is marked destructive", Seq: 2, Resumable: true, AskedAt: now, Expires: now.Add(time.Hour)},
		{ID: "q_cut", Tenant: "acme", Agent: "default", Tool: "crm__wipe", Arguments: `{"sql":"DELETE…"}`, AskedAt: now.Add(time.Second), Expires: now.Add(time.Hour)},
		{ID: "q_gone", Tenant: "acme", Agent: "default", Tool: "crm__wipe", Arguments: `{}`, AskedAt: now.Add(-time.Hour), Expires: now.Add(-time.Minute)},
		{ID: "q_other", Tenant: "globex", Agent: "default", Tool: "docs__drop", Arguments: `{"name":"x"}`, AskedAt: now, Expires: now.Add(time.Hour)},
	} {
		if err := led.SavePause(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	led.Close()

	out, errOut, code := runCLI(t, "", "approvals", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "q_open") || !strings.Contains(out, "acme") || !strings.Contains(out, "crm__wipe") ||
		!strings.Contains(out, "\n    sql = "+sql+"\n") || !strings.Contains(out, "crm__wipe is marked destructive") ||
		!strings.Contains(out, "arguments not shown: the arguments were not kept in full") ||
		strings.Contains(out, "q_gone") || !strings.Contains(out, "q_other") {
		t.Errorf("list: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = runCLI(t, "", "approvals", "list", "--tenant", "acme", "--json", "--config", cfg)
	var listed []approval.Entry
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != 0 || len(listed) != 2 || listed[0].ID != "q_open" ||
		listed[0].Tenant != "acme" || listed[0].Tool != "crm__wipe" || !listed[0].Resumable || listed[0].Arguments != view ||
		listed[1].ID != "q_cut" || listed[1].NotShown == "" {
		t.Errorf("list --json --tenant acme: exit %d, %+v (%v)\n%s", code, listed, err, out)
	}
	_, errOut, code = runCLI(t, "", "approvals", "approve", "q_cut", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "cannot be shown in full: q_cut") || !strings.Contains(errOut, "deny it") {
		t.Errorf("approve one kept without its arguments: exit %d\n%s", code, errOut)
	}
	if out, errOut, code := runCLI(t, "", "approvals", "deny", "q_cut", "--config", cfg); code != 0 || !strings.Contains(out, "denied q_cut") {
		t.Errorf("deny it: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = runCLI(t, "", "approvals", "approve", "q_open", "--by", "ann@example.com", "--config", cfg)
	if code != 0 || !strings.Contains(out, "approved q_open") || !strings.Contains(out, "crm__wipe of tenant acme") ||
		!strings.Contains(out, "sql = "+sql) {
		t.Errorf("approve: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "", "approvals", "deny", "q_open", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "already answered: q_open: accepted by ann@example.com") {
		t.Errorf("deny after approve: exit %d\n%s", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "approvals", "approve", "q_gone", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "expired") {
		t.Errorf("approve an expired one: exit %d\n%s", code, errOut)
	}
	_, errOut, code = runCLI(t, "", "approvals", "approve", "q_never", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "no such approval is kept: q_never") {
		t.Errorf("approve an unknown one: exit %d\n%s", code, errOut)
	}
	out, _, _ = runCLI(t, "", "approvals", "list", "--tenant", "acme", "--config", cfg)
	if !strings.Contains(out, "no approval is pending") {
		t.Errorf("list after the decision:\n%s", out)
	}

	led, err = sqlite.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	if p, err := led.Pause(context.Background(), "q_open"); err != nil || p.Status != budget.ApprovalAccepted || p.AnsweredBy != "ann@example.com" {
		t.Errorf("recorded: %+v, %v", p, err)
	}

	_, errOut, code = runCLI(t, "", "approvals", "list", "--config", testkit.WriteConfig(t, "data_dir: \"-\"\ntenants: {acme: {agents: {default: {}}}}\n"))
	if code != 2 || !strings.Contains(errOut, "no data_dir and no ledger.postgres") {
		t.Errorf("without a shared ledger: exit %d\n%s", code, errOut)
	}
	out, _, code = runCLI(t, "", "approvals", "--help")
	if code != 0 || !strings.Contains(out, "approvals approve ID") || !strings.Contains(out, "The first answer stands") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
	_, _, code = runCLI(t, "", "approvals", "approve")
	if code != 2 {
		t.Errorf("approve without an ID: exit %d, want 2", code)
	}
}
