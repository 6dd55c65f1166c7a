package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// recorder is a telemetry.Metrics that keeps what it was told.
type recorder struct {
	mu    sync.Mutex
	execs []telemetry.Execution
	calls []telemetry.Call
	scope []telemetry.Scope
}

func (r *recorder) Execution(s telemetry.Scope, e telemetry.Execution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs, r.scope = append(r.execs, e), append(r.scope, s)
}

func (r *recorder) Call(s telemetry.Scope, c telemetry.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.scope = append(r.calls, c), append(r.scope, s)
}
func (r *recorder) BudgetRefusal(telemetry.Scope, string, string) {}
func (r *recorder) Approval(telemetry.Scope, string)              {}
func (r *recorder) Kept(telemetry.Scope, string, int64)           {}

// TestRunCodeReports: one run_code reports its execution and its binding calls (upstream
// named only when granted; a denied call is counted with its kind), a direct call is counted as
// the host's, all under the agent's scope; and the engine is handed the execution's logger,
// whose lines name the execution and the Run.
func TestRunCodeReports(t *testing.T) {
	f := newUpstreamFixture(t)
	var logged strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logged.Write(p)
	}), nil))
	rec := &recorder{}
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		for _, name := range []string{"up__echo", "up__secret", "made__up"} {
			ex.Tools.CallTool(ctx, name, json.RawMessage(`{"s":"x"}`))
		}
		ex.Logger.Info("from the backend")
		return ok(`1`)(ctx, ex)
	}}
	a := Agent{Tenant: "acme", Name: "analyst", CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms, Profile: "p"}, Upstreams: f.upstreams(true)}
	cs := connectWith(t, a, &Options{Metrics: rec, Logger: log}, nil)
	if res := call(t, cs, ToolRunCode, map[string]any{"code": "x"}); res.IsError {
		t.Fatalf("run_code: %s", testkit.Text(res))
	}
	if res := call(t, cs, "up__echo", map[string]any{"s": "y"}); res.IsError {
		t.Fatalf("direct: %s", testkit.Text(res))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.execs) != 1 || rec.execs[0].Outcome != "completed" || rec.execs[0].Profile != "p" || rec.execs[0].Start != "unknown" {
		t.Errorf("executions: %+v", rec.execs)
	}
	want := []string{"_ up ok", "_ up denied", "_ _unknown unavailable", "host up ok"}
	var got []string
	for _, c := range rec.calls {
		who := "_"
		if c.Direct {
			who = "host"
		}
		got = append(got, who+" "+c.Upstream+" "+c.Outcome)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("calls %v, want %v", got, want)
	}
	for _, s := range rec.scope {
		if s != (telemetry.Scope{Tenant: "acme", Agent: "analyst"}) {
			t.Errorf("scope %+v", s)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	var line map[string]any
	for _, l := range strings.Split(logged.String(), "\n") {
		if strings.Contains(l, "from the backend") {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line == nil || !strings.HasPrefix(fmtAny(line["execution"]), "x_") || line["tenant"] != "acme" || line["agent"] != "analyst" || fmtAny(line["run"]) == "" {
		t.Errorf("the backend's line does not name its execution: %v\n%s", line, logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

func fmtAny(v any) string {
	s, _ := v.(string)
	return s
}
