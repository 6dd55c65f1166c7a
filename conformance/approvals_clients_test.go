package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
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
// never runs and the program sees kind denied.
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
						if len(r.asked) != 1 || !strings.Contains(r.asked[0], "support__add") || !strings.Contains(r.asked[0], `{"a":2,"b":3}`) {
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
		cs, _ = serveProcWith(t, cfg, testkit.NewLog(t, "server"), opts, so)
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
