//go:build linux

package conformance

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestTaskAcrossReplicas (must show 2 of issue 41): replicas on one PostgreSQL ledger. A task
// created on one replica is polled (its status message says the calls made so far), and its
// result read, on another: a client of 2026-07-28
// (any replica answers it) and one of 2025-11-25 in a session of the other replica. A task
// cancelled on another replica than the one running it keeps its result (cancelAcross). A replica
// SIGKILLed while its task's program has a call at the upstream and restarted at once: the
// task is failed (never run again), tasks/get on the restarted replica and on a survivor reads
// failed with what the program had done, the call in flight unknown, and the upstream's
// counter shows it ran once.
func TestTaskAcrossReplicas(t *testing.T) {
	c := startCluster(t)
	url := func(r *replica) string { return "http://" + r.addr + "/mcp" }
	r1, r2 := c.replicas[0], c.replicas[1]
	on1 := testkit.ModernRPC(t, url(r1), replicaToken)
	on2 := testkit.ModernRPC(t, url(r2), replicaToken)
	start := func(code string) string {
		t.Helper()
		var created map[string]any
		if e := on1.Call("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"code": code}}, &created); e != nil ||
			created["resultType"] != "task" {
			t.Fatalf("run_code as a task on %s: %v %+v", r1.name, created, e)
		}
		return created["taskId"].(string)
	}

	// Created on r1, polled and read on r2, by both revisions.
	short := start("import time\ntime.sleep(2)\n6 * 7")
	var detailed map[string]any
	if !waitFor(gate.Scaled(60*time.Second), func() bool {
		if e := on2.Call("tasks/get", map[string]any{"taskId": short}, &detailed); e != nil {
			t.Fatalf("tasks/get on %s: %+v", r2.name, e)
		}
		return detailed["status"] != "working"
	}) {
		t.Fatalf("the task never ended: %v", detailed)
	}
	result, _ := detailed["result"].(map[string]any)
	if sc, _ := result["structuredContent"].(map[string]any); detailed["status"] != "completed" || fmt.Sprint(sc["value"]) != "42" {
		t.Errorf("the task read on %s: %v", r2.name, detailed)
	}
	session2, _ := testkit.OpenRPC(t, url(r2), replicaToken)
	var res struct {
		StructuredContent struct {
			Value int `json:"value"`
		} `json:"structuredContent"`
	}
	if e := session2.Call("tasks/result", map[string]any{"taskId": short}, &res); e != nil || res.StructuredContent.Value != 42 {
		t.Errorf("tasks/result in a 2025-11-25 session of %s: %+v %+v", r2.name, res, e)
	}

	cancelAcross(t, start, on2, session2, r2.name)

	// r1 killed while its task's program waits on the upstream.
	lost := start("await support__lookup(sku=\"before\")\ntry:\n    await call_tool(\"support__class\", {})\nexcept Exception:\n    pass\n" +
		"await support__slow(seconds=600)")
	if !waitFor(gate.Scaled(60*time.Second), func() bool { return c.mockCounts(t)["slow"] == 1 }) {
		t.Fatalf("the slow call never reached the mock: %v", c.mockCounts(t))
	}
	// Its progress, written by r1, read on r2: the calls it has made so far.
	if !waitFor(gate.Scaled(30*time.Second), func() bool {
		if e := on2.Call("tasks/get", map[string]any{"taskId": lost}, &detailed); e != nil {
			t.Fatalf("tasks/get on %s: %+v", r2.name, e)
		}
		msg, _ := detailed["statusMessage"].(string)
		return strings.Contains(msg, "calls made so far: 2")
	}) {
		t.Errorf("the running task's status on %s: %v", r2.name, detailed)
	}
	if err := r1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r1.done
	// r1 restarted at once on the same config and ledger: whichever replica recovers first
	// (its startup recovery, or a survivor's once the lease expires) fails the task; it reads
	// the same on the restarted r1 and on the survivor.
	restarted := startReplica(t, "r1-restarted", c.cfg, c.dsn)
	for _, r := range []*replica{restarted, r2} {
		readLost(t, testkit.ModernRPC(t, url(r), replicaToken), r.name, lost)
	}
	time.Sleep(gate.Scaled(time.Second)) // room for a re-run, were there one, to reach the mock
	if n := c.mockCounts(t)["slow"]; n != 1 {
		t.Errorf("the upstream ran the in-flight call %d times, want once (never re-run)", n)
	}
}

// cancelAcross: a task running on r1 (start starts it there), its output so far read on the
// replica named name (on: its 2026-07-28 client) while it runs, through the handle r1 kept
// (blobs on PostgreSQL), then cancelled there: r1 kills the program and writes its result, which
// reads whole on that replica (tasks/get, and tasks/result in session, of 2025-11-25): failure
// cancelled, its output so far and its call; no process of it is left.
func cancelAcross(t *testing.T, start func(string) string, on, session *testkit.RPC, name string) {
	tag := fmt.Sprintf("%d", time.Now().UnixNano())
	id := start(fmt.Sprintf("import subprocess, time\nawait support__lookup(sku=\"first\")\nprint('before the cancel', flush=True)\n"+
		"subprocess.Popen(['sleep', '1000'], env={'I41_TASK': %q})\ntime.sleep(600)", tag))
	var detailed map[string]any
	msg := ""
	if !waitFor(gate.Scaled(60*time.Second), func() bool {
		if e := on.Call("tasks/get", map[string]any{"taskId": id}, &detailed); e != nil {
			t.Fatalf("tasks/get on %s: %+v", name, e)
		}
		msg, _ = detailed["statusMessage"].(string)
		return strings.Contains(msg, "read_tool_output(handle=") && len(testkit.Tagged("I41_TASK", tag)) > 0
	}) {
		t.Fatalf("the task's output so far never showed on %s: %v", name, detailed)
	}
	hd, _, _ := strings.Cut(strings.SplitN(msg, `read_tool_output(handle="`, 2)[1], `"`)
	var read struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if e := on.Call("tools/call", map[string]any{"name": "read_tool_output", "arguments": map[string]any{"handle": hd}}, &read); e != nil ||
		len(read.Content) == 0 || !strings.Contains(read.Content[0].Text, "before the cancel") {
		t.Errorf("read_tool_output on %s of the output so far %s: %+v %+v", name, hd, read, e)
	}
	var done map[string]any
	if e := on.Call("tasks/cancel", map[string]any{"taskId": id}, &done); e != nil || done["resultType"] != "complete" {
		t.Fatalf("tasks/cancel on %s: %v %+v", name, done, e)
	}
	var result struct {
		StructuredContent struct {
			Stdout  string `json:"stdout"`
			Failure struct {
				Kind string `json:"kind"`
			} `json:"failure"`
			ToolCalls []struct {
				Tool    string `json:"tool"`
				Outcome string `json:"outcome"`
			} `json:"tool_calls"`
		} `json:"structuredContent"`
	}
	if !waitFor(gate.Scaled(60*time.Second), func() bool {
		if e := on.Call("tasks/get", map[string]any{"taskId": id}, &detailed); e != nil {
			t.Fatalf("tasks/get on %s: %+v", name, e)
		}
		return detailed["result"] != nil
	}) {
		t.Fatalf("the task cancelled on %s never had its result: %v", name, detailed)
	}
	b, _ := json.Marshal(detailed["result"])
	_ = json.Unmarshal(b, &result)
	sc := result.StructuredContent
	if detailed["status"] != "cancelled" || sc.Failure.Kind != "cancelled" || sc.Stdout != "before the cancel\n" ||
		len(sc.ToolCalls) != 1 || sc.ToolCalls[0].Tool != "support__lookup" || sc.ToolCalls[0].Outcome != "ok" {
		t.Errorf("the task cancelled on %s reads %v", name, detailed)
	}
	var old struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if e := session.Call("tasks/result", map[string]any{"taskId": id}, &old); e != nil || len(old.Content) == 0 ||
		!strings.Contains(old.Content[0].Text, "cancelled") || !strings.Contains(old.Content[0].Text, "before the cancel") {
		t.Errorf("tasks/result of the cancelled task in a 2025-11-25 session of %s: %+v %+v", name, old, e)
	}
	if !waitFor(gate.Scaled(10*time.Second), func() bool { return len(testkit.Tagged("I41_TASK", tag)) == 0 }) {
		t.Errorf("processes of the task cancelled on %s are left: %v", name, testkit.Tagged("I41_TASK", tag))
	}
}

// readLost polls the task lost (its server killed mid-call) on the replica named name until it
// ends, and checks it reads failed with what its program had done, as its live result would
// list it: lookup ok, class denied by the policy (which the ledger's call records lack), slow
// unknown.
func readLost(t *testing.T, on *testkit.RPC, name, lost string) {
	t.Helper()
	var detailed map[string]any
	if !waitFor(gate.Scaled(4*leaseSeconds*time.Second+10*time.Second), func() bool {
		if e := on.Call("tasks/get", map[string]any{"taskId": lost}, &detailed); e != nil {
			t.Fatalf("tasks/get on %s: %+v", name, e)
		}
		return detailed["status"] != "working"
	}) {
		t.Fatalf("the lost task still reads %v on %s", detailed, name)
	}
	var lostErr struct {
		Data struct {
			StructuredContent struct {
				ToolCalls []struct {
					Seq     int    `json:"seq"`
					Tool    string `json:"tool"`
					Outcome string `json:"outcome"`
					Kind    string `json:"kind"`
				} `json:"tool_calls"`
			} `json:"structuredContent"`
		} `json:"data"`
	}
	b, _ := json.Marshal(detailed["error"])
	_ = json.Unmarshal(b, &lostErr)
	calls := lostErr.Data.StructuredContent.ToolCalls
	if detailed["status"] != "failed" || len(calls) != 3 || calls[0].Tool != "support__lookup" || calls[0].Outcome != "ok" ||
		calls[1].Tool != "support__class" || calls[1].Outcome != "denied" || calls[1].Kind != "denied" ||
		calls[2].Tool != "support__slow" || calls[2].Outcome != "unknown" || calls[2].Seq != 3 {
		t.Errorf("the lost task reads on %s %v", name, detailed)
	}
}
