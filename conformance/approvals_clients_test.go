package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// askedRun is one program run by one client whose person answers every question with action:
// the program's outcome, whether the client saw an error, the questions put to the person, and
// the revision the client spoke.
type askedRun struct {
	out      addOutcome
	asked    []string
	protocol string
}

// TestApprovalsEveryClient (must show 1): go-sdk and mcp-go clients that answer elicitation,
// at their default revision (2026-07-28: the question comes as an input request and the client
// retries the call) and pinned to 2025-11-25 (elicitation/create), over stdio and over HTTP:
// accepted, the mock's add runs exactly once and the program gets its value; declined, it
// never runs and the program sees kind denied. With go-sdk over stdio the program's child is
// seen asleep, using no CPU, while the person is asked.
func TestApprovalsEveryClient(t *testing.T) {
	mcpgo := ecoBuildMCPGoClient(t)
	for _, sdk := range []string{"go-sdk", "mcp-go"} {
		for _, transport := range []string{"stdio", "http"} {
			for _, revision := range []string{"default", "2025-11-25"} {
				t.Run(sdk+"/"+transport+"/"+revision, func(t *testing.T) {
					cfg, counter, _ := approvalConfig(t, 60, false)
					url := ""
					if transport == "http" {
						url = ecoStartHTTP(t, cfg) + "/mcp"
					}
					want := "2026-07-28"
					if revision != "default" {
						want = revision
					}
					for _, action := range []string{"accept", "decline"} {
						before := counts(t, counter)["add"]
						var r askedRun
						if sdk == "go-sdk" {
							r = goSDKAsked(t, cfg, url, revision, action)
						} else {
							r = mcpGoAsked(t, mcpgo, cfg, url, revision, action)
						}
						ran := counts(t, counter)["add"] - before
						if r.protocol != want {
							t.Errorf("%s: the client spoke %q, want %s", action, r.protocol, want)
						}
						if len(r.asked) != 1 || !strings.Contains(r.asked[0], "support__add") || !strings.Contains(r.asked[0], "a = 2\n  b = 3") {
							t.Errorf("%s: questions %q, want one about support__add and its arguments", action, r.asked)
						}
						switch action {
						case "accept":
							if r.out.Value["sum"] != 5 || r.out.Kind != "" || ran != 1 {
								t.Errorf("accepted: %+v, add ran %d times; want the value and exactly 1", r.out, ran)
							}
						case "decline":
							if r.out.Kind != "denied" || r.out.Tool != "support__add" || !r.out.WentOn || ran != 0 {
								t.Errorf("declined: %+v, add ran %d times; want denied and never", r.out, ran)
							}
						}
					}
				})
			}
		}
	}
}

// goSDKAsked runs callAdd through a go-sdk client over stdio (url "") or HTTP.
func goSDKAsked(t *testing.T, cfg, url, revision, action string) askedRun {
	t.Helper()
	p := newPerson()
	p.set(action, nil)
	opts := &mcp.ClientOptions{ElicitationHandler: p.handler}
	var so *mcp.ClientSessionOptions
	if revision != "default" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: revision}
	}
	var cs *mcp.ClientSession
	if url == "" {
		var cmd *exec.Cmd
		cs, cmd = serveProcWith(t, cfg, testkit.NewLog(t, "server"), opts, so)
		// While the person is asked (at 2026-07-28: after input_required was answered and
		// before the retry), the program's interpreter sleeps on its channel.
		p.set(action, func() { childWaitsIdle(t, cmd.Process.Pid) })
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "0"}, opts).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{ecoToken}}}, so)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer cs.Close()
	}
	var r askedRun
	var full approvalResult
	runInto(t, cs, "", callAdd, &r.out, &full)
	r.asked = p.questions()
	r.protocol = cs.InitializeResult().ProtocolVersion
	return r
}

// mcpGoAsked runs callAdd through the mcp-go client over stdio (url "") or HTTP.
func mcpGoAsked(t *testing.T, mcpgo, cfg, url, revision, action string) askedRun {
	t.Helper()
	args := []string{"-elicit", action, "-code", callAdd}
	if revision != "default" {
		args = append(args, "-protocol", revision)
	}
	if url != "" {
		args = append(args, "-url", url, "-token", ecoToken)
	} else {
		args = append(args, "--", built.sandbox, "serve", "--config", cfg)
	}
	out, err := ecoRun(t, 2*time.Minute, ".", os.Environ(), mcpgo, args...)
	if err != nil {
		t.Fatalf("mcpgoclient: %v\n%.500s", err, out)
	}
	var rep struct {
		ecoClientReport
		Asked []string `json:"asked"`
	}
	ecoDecode(t, out, &rep)
	var s struct {
		Value   json.RawMessage `json:"value"`
		Failure json.RawMessage `json:"failure"`
	}
	if err := json.Unmarshal(rep.Structured, &s); err != nil || rep.IsError {
		t.Fatalf("run_code: isError %v, %s (%v); text %s", rep.IsError, rep.Structured, err, rep.Text)
	}
	r := askedRun{asked: rep.Asked, protocol: rep.Protocol}
	if err := json.Unmarshal(s.Value, &r.out); err != nil {
		t.Fatalf("value %s: %v", s.Value, err)
	}
	return r
}

// TestApprovalStateAcrossRestart (must show 3 on one machine, and 7's claim): a program paused
// on an approval survives its server. The server is killed (SIGKILL) while the person is asked
// (input_required was sent) after the program looked a product up; the client's retry, with an
// acceptance, reaches a new server on the same data_dir. With approvals.state_key set the
// state opens, the ledger kept the pause and its journal, and the program runs again from its
// start: the lookup is answered from the journal (the mock's lookup counter stays at 1), add
// runs once, and the result says resumed with 1 call replayed; the ledger holds the first
// approval unknown and the resumed one accepted. Without a key (the server logged that
// retries survive no restart) the state does not open: refused, add never runs.
func TestApprovalStateAcrossRestart(t *testing.T) {
	for _, c := range []struct {
		name           string
		keyed, diverge bool
		program, why   string
		// clean stops the first server with SIGTERM (it drains, cancelling the paused
		// program) instead of SIGKILL; first is how the ledger then holds its approval.
		clean bool
		first string
	}{
		{"keyed", true, false, lookupThenAdd, "", false, "unknown"},
		{"keyed, stopped cleanly", true, false, lookupThenAdd, "", true, "failed"},
		{"keyed, the program reads the clock", true, true, clockThenAdd, "", false, "unknown"},
		{"random key", false, false, lookupThenAdd, "does not open", false, "unknown"},
	} {
		keyed, why := c.keyed, c.why
		t.Run(c.name, func(t *testing.T) {
			cfg, counter, dataDir := approvalConfig(t, 120, false)
			env := os.Environ()
			if keyed {
				appendConfig(t, cfg, "approvals: {state_key: [{env: MCP_SANDBOX_STATE_KEY}, {env: MCP_SANDBOX_OLD_STATE_KEY}]}\n")
				env = append(env, "MCP_SANDBOX_STATE_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
					"MCP_SANDBOX_OLD_STATE_KEY=HxwdHBsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=")
			}
			start := func(name string) *replica {
				cmd := exec.Command(built.sandbox, "serve", "--transport", "http", "--listen", "127.0.0.1:0", "--config", cfg)
				cmd.Env = env
				r := &replica{name: name, cmd: cmd, log: testkit.NewLog(t, name), done: make(chan struct{})}
				r.addr = startLogged(t, cmd, name, regexp.MustCompile(`serving over streamable HTTP.* addr=(\S+)`), r)
				return r
			}
			client := func(r *replica) *mcp.ClientSession {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "0"}, &mcp.ClientOptions{
					ElicitationHandler: newPerson().handler, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
				}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + r.addr + "/mcp", HTTPClient: &http.Client{Transport: bearer{ecoToken}}}, nil)
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				t.Cleanup(func() { cs.Close() })
				return cs
			}
			const runID = "approval-restart"
			params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": c.program}, Meta: mcp.Meta{"mcp-sandbox/run": runID}}
			first := start("first")
			if logged := strings.Contains(first.log.String(), "survives no restart"); logged == keyed {
				t.Errorf("the log says a retry survives no restart: %v; want %v", logged, !keyed)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := client(first).CallTool(ctx, params)
			if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 {
				t.Fatalf("first round: %v %v", err, res)
			}
			var q string
			for id := range res.InputRequests {
				q = id
			}
			if got := decisions(approvalsOf(t, dataDir, runID)); got != "pending" {
				t.Fatalf("while asking, the ledger holds %q, want pending", got)
			}
			if n := counts(t, counter)["lookup"]; n != 1 {
				t.Fatalf("before the pause the mock ran lookup %d times, want 1", n)
			}
			stop := first.cmd.Process.Kill
			if c.clean {
				stop = func() error { return first.cmd.Process.Signal(syscall.SIGTERM) }
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			<-first.done

			second := start("second")
			again := *params
			again.RequestState = res.RequestState
			again.InputResponses = mcp.InputResponseMap{q: &mcp.ElicitResult{Action: "accept"}}
			res2, err := client(second).CallTool(ctx, &again)
			if err != nil {
				t.Fatal(err)
			}
			n := counts(t, counter)
			if c.diverge {
				// Must show 5: another path on the second run; nothing past the divergence runs.
				var r struct {
					Failure *struct{ Kind, Message string } `json:"failure"`
				}
				b, _ := json.Marshal(res2.Meta["mcp-sandbox/report"])
				if err := json.Unmarshal(b, &r); err != nil || r.Failure == nil || r.Failure.Kind != "replay_diverged" ||
					!strings.Contains(r.Failure.Message, "call 1 was support__lookup") {
					t.Errorf("the resumed program that read the clock: %s", testkit.Text(res2))
				}
				if n["add"] != 0 || n["lookup"] != 1 {
					t.Errorf("the mock ran add %d and lookup %d times, want 0 and 1 (the first run's)", n["add"], n["lookup"])
				}
				return
			}
			if !keyed {
				if msg := testkit.Text(res2); !res2.IsError || !strings.Contains(msg, "was refused") || !strings.Contains(msg, why) {
					t.Errorf("the retry after a restart: %v %s; want refused: %s", res2.IsError, msg, why)
				}
				if n["add"] != 0 || n["lookup"] != 1 {
					t.Errorf("the mock ran add %d and lookup %d times, want 0 and 1", n["add"], n["lookup"])
				}
				if got := decisions(approvalsOf(t, dataDir, runID)); got != "unknown" {
					t.Errorf("after the restart the ledger holds %q, want unknown", got)
				}
				return
			}
			var r struct {
				Value struct {
					Value map[string]float64 `json:"value"`
					Found map[string]any     `json:"found"`
				} `json:"value"`
				Failure *struct{ Kind, Message string } `json:"failure"`
				Resumed *struct {
					ReplayedCalls int `json:"replayed_calls"`
				} `json:"resumed"`
			}
			b, _ := json.Marshal(res2.Meta["mcp-sandbox/report"])
			if err := json.Unmarshal(b, &r); err != nil || res2.IsError || r.Failure != nil {
				t.Fatalf("the resumed program: %v %s (%v)", res2.IsError, testkit.Text(res2), err)
			}
			if r.Resumed == nil || r.Resumed.ReplayedCalls != 1 || r.Value.Value["sum"] != 5 || r.Value.Found["sku"] != "S1" {
				t.Errorf("resumed %+v, value %+v; want 1 call replayed, the sum and the journaled lookup", r.Resumed, r.Value)
			}
			if n["add"] != 1 || n["lookup"] != 1 {
				t.Errorf("the mock ran add %d and lookup %d times, want exactly 1 and 1 (the lookup not again)", n["add"], n["lookup"])
			}
			if !strings.Contains(testkit.Text(res2), "approvals: 1 asked (1 accepted") {
				t.Errorf("the resumed result's text: %s", testkit.Text(res2))
			}
			if got := decisions(approvalsOf(t, dataDir, runID)); got != c.first+", accepted" {
				t.Errorf("after the resumption the ledger holds %q, want the first %s and the second accepted", got, c.first)
			}
		})
	}
}

// lookupThenAdd looks a product up, then adds under approval: the lookup is the call a
// resumed program must not make again.
const lookupThenAdd = `
found = await support__lookup(sku="S1")
try:
    out = {"value": await support__add(a=2, b=3)}
except ToolError as e:
    out = {"kind": e.kind, "tool": e.tool, "message": str(e)}
out["found"] = found
return out
`

// clockThenAdd looks up a SKU made of the clock: run again, it asks for another one.
const clockThenAdd = `
import time
found = await support__lookup(sku="S%d" % time.time_ns())
try:
    out = {"value": await support__add(a=2, b=3)}
except ToolError as e:
    out = {"kind": e.kind, "tool": e.tool, "message": str(e)}
return out
`
