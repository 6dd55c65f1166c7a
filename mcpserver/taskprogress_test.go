package mcpserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// TestTaskPartialOutputLeavesRoom: a task's partial copy of its output so far is dropped
// before its output is kept, so a tenant whose blob quota holds the one or the other, not
// both, has its output kept (not lost to its own progress copy).
func TestTaskPartialOutputLeavesRoom(t *testing.T) {
	fs, err := outputs.OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blobs := outputs.WithQuota(fs, outputs.StoreQuota{Tenant: func(string) int64 { return 10_000 }})
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		c := outputs.NewCapture(1<<20, 1000)
		c.Write([]byte(strings.Repeat("o", 6000)))
		ex.Progress(1, c)
		// The status writer keeps the output so far within a poll interval.
		for deadline := time.Now().Add(gate.Scaled(30 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if n, err := fs.TenantBytes(ctx, "t"); err == nil && n >= 6000 {
				break
			}
		}
		return ok(`"`+strings.Repeat("v", 6000)+`"`)(ctx, ex) // kept under a handle: over ValuePreviewBytes
	}}
	led, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	srv := httptest.NewServer(HTTPHandler(&HTTPOptions{Agents: []Agent{{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}}},
		Loopback: true, Authenticate: func(tok string) (string, bool) { return "t", tok == "tok" },
		Server: &Options{Logger: discard(), Drain: drainAtCleanup(t), Ledger: led, Blobs: blobs}, Logger: discard()}))
	t.Cleanup(srv.Close)
	cs, _ := testkit.OpenRPC(t, srv.URL+"/mcp", "tok")
	var a wireTaskAnswer
	if e := cs.Call("tools/call", map[string]any{"name": ToolRunCode, "arguments": map[string]any{"code": "x"},
		"task": map[string]any{"ttl": 60000}}, &a); e != nil {
		t.Fatalf("task-augmented tools/call: %+v", e)
	}
	var res struct {
		StructuredContent struct {
			Attachments []outputs.Attachment `json:"attachments"`
		} `json:"structuredContent"`
	}
	if e := cs.Call("tasks/result", map[string]any{"taskId": a.Task.TaskID}, &res); e != nil {
		t.Fatalf("tasks/result: %+v", e)
	}
	kept := false
	for _, at := range res.StructuredContent.Attachments {
		kept = kept || (at.Name == "value" && at.Handle != "")
	}
	if !kept {
		b, _ := json.Marshal(res.StructuredContent.Attachments)
		t.Errorf("the task's value was not kept under its quota beside its partial output: attachments %s", b)
	}
	if n, err := fs.TenantBytes(t.Context(), "t"); err != nil || n > 10_000 {
		t.Errorf("the tenant keeps %d bytes (%v) once the task ended; want its value alone", n, err)
	}
}
