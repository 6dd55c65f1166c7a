package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// operatorPending runs `mcp-sandbox approvals list --json` on cfg and returns the pending
// approvals.
func operatorPending(t *testing.T, cfg string) []struct{ ID, Tenant, Tool, Arguments string } {
	t.Helper()
	out, err := exec.Command(built.sandbox, "approvals", "list", "--json", "--config", cfg).Output()
	if err != nil {
		t.Fatalf("approvals list: %v", err)
	}
	var pending []struct{ ID, Tenant, Tool, Arguments string }
	if err := json.Unmarshal(out, &pending); err != nil {
		t.Fatalf("approvals list --json: %v\n%s", err, out)
	}
	return pending
}

// sqlTail is the body TestOperatorApproves's program sends: a DROP TABLE past its first 200
// bytes, where a view cut for a log line would hide it (issue 38, S3).
var sqlTail = "SELECT name FROM users WHERE id IN (" + strings.Repeat("1, ", 100) + "2); DROP TABLE users"

// callRecord calls support__create_record (which approvalConfig's policy puts to a person)
// with sqlTail as its body: its value, or the ToolError's kind and message.
var callRecord = fmt.Sprintf(`
try:
    out = {"value": await support__create_record(title="report", body=%q)}
except ToolError as e:
    out = {"kind": e.kind, "message": str(e)}
return out
`, sqlTail)

// TestOperatorApproves (must show 6): a program paused on an approval is listed by
// `mcp-sandbox approvals list` with its tenant, tool and arguments, every one in full as the
// person was shown them (issue 38: the tail of a long sql value too), and `approvals approve ID`
// releases it: the call runs once and the program gets its value. For a client of
// 2025-11-25 the question put by elicitation/create is withdrawn and the waiting run_code
// returns; for a client of 2026-07-28 its retry collects the result, and the operator's
// decision stands over the client's own later answer (here a decline). The webhook
// (approvals.webhook) hears of the pending approval once, with its bearer token and the same
// arguments.
func TestOperatorApproves(t *testing.T) {
	for _, revision := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(revision, func(t *testing.T) {
			cfg, counter, _ := approvalConfig(t, 300, false)
			hook := startHook(t)
			appendConfig(t, cfg, fmt.Sprintf("approvals: {webhook: {url: %q, bearer: {file: %q}}}\n", hook.url, hook.tokenFile))
			p := newPerson()
			p.set("", nil) // the person never answers in the client
			opts := &mcp.ClientOptions{ElicitationHandler: p.handler}
			so := revisionElicit
			if revision != "2025-11-25" {
				opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
				so = nil
			}
			cs, _ := serveProcWith(t, cfg, testkit.NewLog(t, "server"), opts, so)
			params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": callRecord}, Meta: mcp.Meta{"mcp-sandbox/run": "operator"}}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			type reply struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan reply, 1)
			go func() {
				res, err := cs.CallTool(ctx, params)
				done <- reply{res, err}
			}()
			var first reply
			if revision == "2025-11-25" {
				<-p.open // asked in place: the call waits
			} else {
				first = <-done // answered input_required
				if first.err != nil || !first.res.NeedsInput() {
					t.Fatalf("first round: %v %+v", first.err, first.res)
				}
			}
			var notice hookNotice
			select {
			case notice = <-hook.notices:
			case <-ctx.Done():
				t.Fatal("the webhook heard of no pending approval")
			}
			pending := operatorPending(t, cfg)
			view := fmt.Sprintf("  body = %q\n  title = \"report\"\n", sqlTail)
			if len(pending) != 1 || pending[0].Tenant != "t" || pending[0].Tool != "support__create_record" || pending[0].Arguments != view {
				t.Fatalf("pending approvals: %+v", pending)
			}
			if q := p.questions(); revision == "2025-11-25" && (len(q) != 1 || !strings.Contains(q[0], view)) {
				t.Errorf("the person was asked %q, not the view the operator has:\n%s", q, view)
			}
			if out, err := exec.Command(built.sandbox, "approvals", "list", "--config", cfg).Output(); err != nil ||
				!strings.Contains(string(out), fmt.Sprintf("    body = %q\n", sqlTail)) {
				t.Errorf("approvals list: %v\n%s", err, out)
			}
			if n := counts(t, counter)["create_record"]; n != 0 {
				t.Fatalf("create_record ran %d times before anyone approved", n)
			}
			out, err := exec.Command(built.sandbox, "approvals", "approve", pending[0].ID, "--by", "ops@example.com", "--config", cfg).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "approved "+pending[0].ID) {
				t.Fatalf("approvals approve: %v\n%s", err, out)
			}
			var got reply
			if revision == "2025-11-25" {
				got = <-done
			} else {
				again := *params
				again.RequestState = first.res.RequestState
				again.InputResponses = mcp.InputResponseMap{}
				for id := range first.res.InputRequests {
					again.InputResponses[id] = &mcp.ElicitResult{Action: "decline"}
				}
				got.res, got.err = cs.CallTool(ctx, &again)
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			var r struct {
				Value struct {
					Value struct{ Bytes int } `json:"value"`
					Kind  string              `json:"kind"`
				} `json:"value"`
			}
			b := reportOf(got.res)
			if err := json.Unmarshal(b, &r); err != nil || r.Value.Value.Bytes != len(sqlTail) || r.Value.Kind != "" {
				t.Errorf("released by the operator: %s", testkit.Text(got.res))
			}
			if n := counts(t, counter)["create_record"]; n != 1 {
				t.Errorf("create_record ran %d times, want 1", n)
			}
			if pending := operatorPending(t, cfg); len(pending) != 0 {
				t.Errorf("still pending: %+v", pending)
			}
			if notice.Event != "approval_pending" || notice.Approval.ID != pending[0].ID || notice.Approval.Tenant != "t" ||
				notice.Approval.Tool != "support__create_record" || notice.Approval.Arguments != view || notice.Bearer != "Bearer hook-secret" {
				t.Errorf("the webhook's notice: %+v", notice)
			}
			if n := len(hook.notices); n != 0 {
				t.Errorf("the webhook heard %d more notices, want one per pending approval", n)
			}
		})
	}
}

// hookNotice is one POST the test's webhook received.
type hookNotice struct {
	Event    string `json:"event"`
	Approval struct {
		ID, Tenant, Tool, Arguments string
	} `json:"approval"`
	Bearer string `json:"-"`
}

type hook struct {
	url, tokenFile string
	notices        chan hookNotice
}

// startHook serves a webhook on loopback that keeps every notice it is POSTed.
func startHook(t *testing.T) *hook {
	t.Helper()
	h := &hook{notices: make(chan hookNotice, 16), tokenFile: filepath.Join(t.TempDir(), "hook-token")}
	if err := os.WriteFile(h.tokenFile, []byte("hook-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n hookNotice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n.Bearer = r.Header.Get("Authorization")
		h.notices <- n
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook"
	return h
}

// appendConfig adds text to the config file at path.
func appendConfig(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
