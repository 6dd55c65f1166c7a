package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// runApprovals is the operator's channel for approvals (docs/design.md §10, §11): the calls
// paused on a person's approval, listed from the run ledger the servers share, and decided
// there. A decision is final and recorded once: the server holding the call sees it within a
// second and carries the call on (or refuses it), and the client's own answer, if it comes
// later, finds it decided.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("approvals", approvalsUsage, stdout, stderr)
	asJSON := fs.Bool("json", false, "print as JSON: list, an array of pending approvals; approve and deny, the approval decided")
	tenant := fs.String("tenant", "", "list only this tenant's approvals")
	by := fs.String("by", "", `who decides, recorded with the decision (default: "operator" and $USER)`)
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	verb, rest := "", fs.Args()
	if len(rest) > 0 {
		verb, rest = rest[0], rest[1:]
	}
	switch {
	case verb == "list" && len(rest) == 0:
	case (verb == "approve" || verb == "deny") && len(rest) == 1:
	default:
		fs.Usage()
		return exitUsage, usagef("want list, approve ID or deny ID")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	pauses, closeLedger, err := assembly.OpenSharedLedger(ctx, cfg)
	if err != nil {
		return exitCode(err), err
	}
	defer closeLedger()
	if verb == "list" {
		return listApprovals(ctx, pauses, *tenant, *asJSON, stdout)
	}
	who := *by
	if who == "" {
		who = strings.TrimSpace("operator " + os.Getenv("USER"))
	}
	return decideApproval(ctx, pauses, rest[0], verb == "approve", who, *asJSON, stdout)
}

func listApprovals(ctx context.Context, pauses budget.Pauses, tenant string, asJSON bool, stdout io.Writer) (int, error) {
	out, err := approval.List(ctx, pauses, tenant)
	if err != nil {
		return exitFailure, err
	}
	if asJSON {
		return exitOK, json.NewEncoder(stdout).Encode(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no approval is pending")
		return exitOK, nil
	}
	now := time.Now()
	for i, a := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s  tenant %s  agent %s  tool %s  asked %s ago  expires in %s\n", a.ID, a.Tenant, a.Agent, a.Tool,
			now.Sub(a.AskedAt).Round(time.Second), a.ExpiresAt.Sub(now).Round(time.Second))
		writeArguments(stdout, a)
	}
	return exitOK, nil
}

// writeArguments prints an approval's reason and its arguments as the person was shown them,
// whole (one "path = value" line each, indented), or why they cannot be shown.
func writeArguments(w io.Writer, a approval.Entry) {
	fmt.Fprintf(w, "  needs approval: %s\n", a.Reason)
	if a.NotShown != "" {
		fmt.Fprintf(w, "  arguments not shown: %s\n", a.NotShown)
		return
	}
	fmt.Fprintln(w, "  arguments, every one in full:")
	for _, l := range strings.Split(strings.TrimSuffix(a.Arguments, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

func decideApproval(ctx context.Context, pauses budget.Pauses, id string, approve bool, by string, asJSON bool, stdout io.Writer) (int, error) {
	verb := "denied"
	if approve {
		verb = "approved"
	}
	p, err := approval.Decide(ctx, pauses, id, approve, by)
	if err != nil {
		return exitFailure, err
	}
	if asJSON {
		return exitOK, json.NewEncoder(stdout).Encode(approval.EntryOf(p))
	}
	fmt.Fprintf(stdout, "%s %s: %s of tenant %s\n", verb, id, p.Tool, p.Tenant)
	writeArguments(stdout, approval.EntryOf(p))
	fmt.Fprintln(stdout, "The server holding the call sees the decision within a second and carries it on.")
	if p.Resumable {
		fmt.Fprintln(stdout, "If that server is gone, the program is run again from its journal when the client retries the call.")
	}
	return exitOK, nil
}

const approvalsUsage = `Usage: mcp-sandbox approvals list [--config FILE] [--tenant T] [--json]
       mcp-sandbox approvals approve ID [--config FILE] [--by NAME] [--json]
       mcp-sandbox approvals deny ID [--config FILE] [--by NAME] [--json]

The operator's side of approvals. A tool call that needs a person's approval (the policy's
approval_required, a tool marked destructive, an argument rule) is put to the person through
the MCP client: elicitation/create for clients of MCP 2025-11-25, an input_required answer for
clients of 2026-07-28. Each such question is also kept in the run ledger the servers share
(data_dir's SQLite file, or ledger.postgres), where this command lists and decides it:

  list      the pending approvals: their ID, tenant, agent, tool, how long ago they were asked,
            how long they stay open, why they need approval, and the call's arguments as the
            person was shown them: every key with its value in full (only the values the
            tool's schema marks writeOnly or a password are "[redacted]", and named)
  approve   accept call ID: the program (or direct call) holding it makes the call. An
            approval kept without its arguments in full (asked by an older version) can
            be denied, not approved
  deny      decline call ID: the program sees a ToolError of kind "denied" and goes on

The first answer stands, from either channel: the person's in the client, or yours here. The
server holding the call sees your decision within a second. If that server is gone (killed,
restarted), a client of 2026-07-28 that retries the call reaches another server on the same
ledger, which runs the program again from its start, answering the calls it had made from
their journal (they are not made again) and the approved one with the decision.

Examples:
  mcp-sandbox approvals list --config deploy.yaml
  mcp-sandbox approvals approve q_5d1c… --config deploy.yaml --by ann@example.com
  mcp-sandbox approvals deny q_5d1c… --config deploy.yaml

Exit status: 0 when listed or decided; 1 when the approval is not kept, expired, was already
answered (a decision is final), or the ledger failed; 2 for usage or configuration errors.
`
