package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestApprovalRetryAtAnotherReplica (must show 2): three replicas on PostgreSQL behind the
// balancer, sharing approvals.state_key. A client of 2026-07-28 runs a program that needs an
// approval; the question comes back input_required from the replica that holds the program.
// The client's retry, with the acceptance, reaches another replica (sent there directly, as a
// balancer without affinity may): that replica records the answer in the ledger and waits;
// the holder sees it, carries its program on, and relays the result through the ledger. The
// program completes with the mock's add counter at exactly 1, and never started twice. Then
// (must show 3) the replica holding a second paused program is killed, and the retry at
// another replica resumes it from its journal once the dead replica's lease has run out.
func TestApprovalRetryAtAnotherReplica(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	gate.Require(t, "haproxy", err == nil, "haproxy is not installed (apt-get install haproxy)")
	c := &cluster{dsn: pgtest.Schema(t)}
	c.mock = startHTTPMock(t) + "/mcp"
	keyFile := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(keyFile, []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgText := strings.Replace(replicaConfig(c.mock), "    policy: {deny: [\"support__class\"]}\n",
		"    policy: {deny: [\"support__class\"], approval_required: [\"support__add\"]}\n", 1) +
		fmt.Sprintf("approvals: {state_key: {file: %q}}\n", keyFile)
	cfg := testkit.WriteConfig(t, cfgText)
	for i := range 3 {
		c.replicas = append(c.replicas, startReplica(t, fmt.Sprintf("r%d", i+1), cfg, c.dsn))
	}
	c.url, c.stats = startHAProxy(t, haproxy, c.replicas)

	connect := func(url string, s *served) *mcp.ClientSession {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "replicas", Version: "0"}, &mcp.ClientOptions{
			ElicitationHandler: newPerson().handler, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: s}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	s := &served{}
	cs := connect(c.url, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": callAdd}}
	res, err := cs.CallTool(ctx, params)
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 {
		t.Fatalf("first round: %v %+v", err, res)
	}
	holder := s.last("tools/call")
	var other *replica
	for _, r := range c.replicas {
		if r.name != holder && other == nil {
			other = r
		}
	}
	if holder == "" || other == nil {
		t.Fatalf("the question came from replica %q; no other to retry at", holder)
	}
	again := *params
	again.RequestState = res.RequestState
	again.InputResponses = mcp.InputResponseMap{}
	for id := range res.InputRequests {
		again.InputResponses[id] = &mcp.ElicitResult{Action: "accept"}
	}
	direct := &served{}
	res2, err := connect("http://"+other.addr+"/mcp", direct).CallTool(ctx, &again)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Value   addOutcome `json:"value"`
		Resumed *struct{}  `json:"resumed"`
	}
	b, _ := json.Marshal(res2.Meta["mcp-sandbox/report"])
	if err := json.Unmarshal(b, &r); err != nil || res2.IsError || r.Value.Value["sum"] != 5 || r.Resumed != nil {
		t.Errorf("the retry at %s (the holder is %s): %s", other.name, holder, testkit.Text(res2))
	}
	if n := c.mockCounts(t)["add"]; n != 1 {
		t.Errorf("the mock ran add %d times, want exactly 1", n)
	}
	if !strings.Contains(other.log.String(), "waits for the process holding the call") {
		t.Errorf("replica %s did not wait for the holder:\n%s", other.name, other.log.String())
	}

	// Must show 3 on replicas: the holder of a paused program is killed; the retry at another
	// replica waits out the dead holder's lease, claims the pause and runs the program again
	// from its journal: the lookup before the pause is not made again, add runs once.
	params.Arguments = map[string]any{"code": lookupThenAdd}
	res, err = cs.CallTool(ctx, params)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first round of the second program: %v %+v", err, res)
	}
	holder = s.last("tools/call")
	other = nil
	for _, r := range c.replicas {
		if r.name == holder {
			if err := r.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-r.done
		} else if other == nil {
			other = r
		}
	}
	again.RequestState, again.Arguments = res.RequestState, params.Arguments
	again.InputResponses = mcp.InputResponseMap{}
	for id := range res.InputRequests {
		again.InputResponses[id] = &mcp.ElicitResult{Action: "accept"}
	}
	res3, err := connect("http://"+other.addr+"/mcp", &served{}).CallTool(ctx, &again)
	if err != nil {
		t.Fatal(err)
	}
	var r3 struct {
		Value struct {
			Value map[string]float64 `json:"value"`
		} `json:"value"`
		Resumed *struct {
			ReplayedCalls int `json:"replayed_calls"`
		} `json:"resumed"`
	}
	b, _ = json.Marshal(res3.Meta["mcp-sandbox/report"])
	if err := json.Unmarshal(b, &r3); err != nil || res3.IsError || r3.Value.Value["sum"] != 5 || r3.Resumed == nil || r3.Resumed.ReplayedCalls != 1 {
		t.Errorf("the retry at %s after %s was killed: %s", other.name, holder, testkit.Text(res3))
	}
	if n := c.mockCounts(t); n["add"] != 2 || n["lookup"] != 1 {
		t.Errorf("the mock ran add %d and lookup %d times in all, want 2 and 1 (the lookup not again)", n["add"], n["lookup"])
	}
}
