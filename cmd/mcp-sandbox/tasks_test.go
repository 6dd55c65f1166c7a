package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// taskOf is a task as tasks/get and tasks/cancel answer it.
type taskOf struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

// TestServeTasks (must show 4 of issue 41, and 1 by JSON-RPC by hand; conformance's
// TestTasksClient2025 runs the 20 s program with a real client): the built binary over HTTP,
// a client of 2025-11-25 that asks for tasks. A program's task of about 4 s (stretched by
// gate.Scaled) comes back at once and polls working, its status message quoting the lines it
// printed so far and naming a handle read_tool_output reads them from, then completed with its
// value and output; tasks/cancel of another program's task ends it cancelled, with its result,
// and no process of it is left; tenant beta asking for tenant alpha's task id gets the answer
// for an unknown task.
func TestServeTasks(t *testing.T) {
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
profiles:
  default: {backend: process, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
tenants:
  alpha:
    tokens: [%q]
    agents:
      a: {code_execution: {profile: default}}
  beta:
    tokens: [%q]
    agents:
      a: {code_execution: {profile: default}}
`, filepath.Join(t.TempDir(), "data"), configs.HashToken("token-alpha"), configs.HashToken("token-beta")))
	base := startHTTP(t, cfg)
	alpha, _ := testkit.OpenRPC(t, base+"/mcp", "token-alpha")
	beta, _ := testkit.OpenRPC(t, base+"/mcp", "token-beta")
	start := func(code string) taskOf {
		t.Helper()
		var a struct {
			Task taskOf `json:"task"`
		}
		began := time.Now()
		if e := alpha.Call("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"code": code},
			"task": map[string]any{"ttl": 600000}}, &a); e != nil || a.Task.Status != "working" {
			t.Fatalf("task-augmented run_code: %+v %+v", a, e)
		}
		if took := time.Since(began); took > gate.Scaled(5*time.Second) {
			t.Errorf("the task came back after %v, not at once", took)
		}
		return a.Task
	}
	get := func(s *testkit.RPC, id string) (taskOf, *testkit.RPCError) {
		var got taskOf
		e := s.Call("tasks/get", map[string]any{"taskId": id}, &got)
		return got, e
	}

	// The checks below must see it still working: it prints for 14 steps of 0.3 s, stretched
	// as the deadlines are on a loaded machine, whose tasks/get and status writes are slower too.
	step := gate.Scaled(300 * time.Millisecond).Seconds()
	long := start(fmt.Sprintf("import time\nfor i in range(14):\n    print('line', i, flush=True)\n    time.sleep(%.3f)\n6 * 7", step))
	marker := fmt.Sprintf("71.%d", time.Now().UnixNano()%100000)
	killed := start(fmt.Sprintf("import subprocess, time\nsubprocess.Popen(['sleep', '%s'])\ntime.sleep(60)", marker))

	if got, e := get(alpha, long.TaskID); e != nil || got.Status != "working" {
		t.Errorf("tasks/get of the running task: %+v %+v", got, e)
	}
	_, e := get(beta, long.TaskID)
	_, unknown := get(beta, "t_0123456789abcdef0123456789abcdef")
	if e == nil || unknown == nil || e.Code != unknown.Code ||
		strings.Replace(e.Message, long.TaskID, "ID", 1) != strings.Replace(unknown.Message, "t_0123456789abcdef0123456789abcdef", "ID", 1) {
		t.Errorf("tenant beta asking for alpha's task: %+v; for an unknown task: %+v", e, unknown)
	}

	// The output so far, while it runs: the lines so far in the status message, and all of
	// them through the handle it names.
	var partial taskOf
	if !waitFor(gate.Scaled(20*time.Second), func() bool {
		partial, e = get(alpha, long.TaskID)
		return e != nil || partial.Status != "working" || strings.Contains(partial.StatusMessage, "read_tool_output(handle=")
	}) || partial.Status != "working" || !strings.Contains(partial.StatusMessage, `output so far`) ||
		!strings.Contains(partial.StatusMessage, `line 0\n`) {
		t.Errorf("the running task's status shows no output so far: %+v %+v", partial, e)
	} else {
		hd, _, _ := strings.Cut(strings.SplitN(partial.StatusMessage, `read_tool_output(handle="`, 2)[1], `"`)
		var read struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if e := alpha.Call("tools/call", map[string]any{"name": "read_tool_output", "arguments": map[string]any{"handle": hd}}, &read); e != nil ||
			read.IsError || len(read.Content) == 0 || !strings.Contains(read.Content[0].Text, "line 0") {
			t.Errorf("read_tool_output of the partial output %s: %+v %+v", hd, read, e)
		}
		if e := beta.Call("tools/call", map[string]any{"name": "read_tool_output", "arguments": map[string]any{"handle": hd}}, &read); e == nil &&
			(!read.IsError || strings.Contains(read.Content[0].Text, "line 0")) {
			t.Errorf("tenant beta read alpha's partial output: %+v", read)
		}
	}

	if !waitFor(gate.Scaled(20*time.Second), func() bool { return procsWith("sleep "+marker) > 0 }) {
		t.Fatal("the second program's child never started")
	}
	var cancelled taskOf
	if e := alpha.Call("tasks/cancel", map[string]any{"taskId": killed.TaskID}, &cancelled); e != nil || cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel: %+v %+v", cancelled, e)
	}
	if !waitFor(gate.Scaled(2*time.Second), func() bool { return procsWith("sleep "+marker) == 0 }) {
		t.Error("a process of the cancelled task is left")
	}
	var cres struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if e := alpha.Call("tasks/result", map[string]any{"taskId": killed.TaskID}, &cres); e != nil || len(cres.Content) == 0 ||
		!strings.Contains(cres.Content[0].Text, "cancelled") {
		t.Errorf("the cancelled task's result: %+v %+v", cres, e)
	}

	for {
		got, e := get(alpha, long.TaskID)
		if e != nil {
			t.Fatalf("tasks/get: %+v", e)
		}
		if got.Status != "working" {
			if got.Status != "completed" {
				t.Fatalf("the long task ended %+v", got)
			}
			break
		}
		time.Sleep(time.Duration(got.PollInterval) * time.Millisecond)
	}
	var res struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Value  int    `json:"value"`
			Stdout string `json:"stdout"`
		} `json:"structuredContent"`
	}
	if e := alpha.Call("tasks/result", map[string]any{"taskId": long.TaskID}, &res); e != nil || res.IsError ||
		res.StructuredContent.Value != 42 || !strings.HasPrefix(res.StructuredContent.Stdout, "line 0\nline 1\n") ||
		!strings.HasSuffix(res.StructuredContent.Stdout, "line 13\n") {
		t.Errorf("the long task's result: %+v %+v", res, e)
	}
}
