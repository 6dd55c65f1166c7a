package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// revisionElicit is the latest MCP revision in which a server asks with elicitation/create;
// go-sdk clients speak 2026-07-28 by default, where the question is an input request
// (TestApprovalsEveryClient).
var revisionElicit = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// approvalConfig: tenant t with the mock as "support" (counting into counter), support__add
// under approval_required, a profile whose approvals wait timeout seconds.
func approvalConfig(t *testing.T, timeout int, expose bool) (cfgPath, counter, dataDir string) {
	dir := t.TempDir()
	counter, dataDir = filepath.Join(dir, "counter.json"), filepath.Join(dir, "data")
	return testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %[3]q
`+processProfile+`    hard_limits: {wall_seconds: 90}
    approvals: {timeout_seconds: %[4]d}
upstreams:
  support: {command: [%[1]q], env: {MOCK_COUNTER_FILE: %[2]q}}
tenants:
  t:
    tokens: ["sha256:f25304f25690670ae008ff9c122fbcfb785ec4541a0cad4c6d5591f1cb6de5e6"]  # ecoToken, for HTTP
    upstreams: [support]
    policy: {approval_required: ["support__add", "support__create_record"]}
    agents:
      default:
        expose_upstream_tools: %[5]v
        code_execution: {limits: {wall_seconds: 90}}
`, built.mock, counter, dataDir, timeout, expose)), counter, dataDir
}

// person answers elicitation/create: with the action set (or, with "", never, until the
// server withdraws the question). during runs while a question is open.
type person struct {
	mu     sync.Mutex
	action string
	during func()
	asked  []string
	open   chan struct{} // receives once per question
}

func newPerson() *person { return &person{open: make(chan struct{}, 16)} }

// servePerson starts `serve` with cfgPath for a client that declares elicitation, at a
// revision that allows asking, answered by a new person; it returns the session, the person
// and the server's process.
func servePerson(t *testing.T, cfgPath string) (*mcp.ClientSession, *person, *exec.Cmd) {
	t.Helper()
	p := newPerson()
	cs, cmd := serveProcWith(t, cfgPath, testkit.NewLog(t, "server"), &mcp.ClientOptions{ElicitationHandler: p.handler}, revisionElicit)
	return cs, p, cmd
}

func (p *person) set(action string, during func()) {
	p.mu.Lock()
	p.action, p.during = action, during
	p.mu.Unlock()
}

func (p *person) handler(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	action, during := p.action, p.during
	p.asked = append(p.asked, req.Params.Message)
	p.mu.Unlock()
	p.open <- struct{}{}
	if during != nil {
		during()
	}
	if action == "" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &mcp.ElicitResult{Action: action, Meta: mcp.Meta{"mcp-sandbox/answered_by": "ann@example.com"}}, nil
}

func (p *person) questions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// approvalResult is what the tests read of a run_code result.
type approvalResult struct {
	result
	DurationSeconds float64 `json:"duration_seconds"`
	Approvals       struct {
		Asked, Accepted, Declined, Unasked int
		TimedOut                           int `json:"timed_out"`
	} `json:"approvals"`
}

// callAdd is a program calling support__add(2, 3): its value, or the ToolError's kind and
// message; then it goes on and says so.
const callAdd = `
try:
    out = {"value": await support__add(a=2, b=3)}
except ToolError as e:
    out = {"kind": e.kind, "tool": e.tool, "message": str(e)}
out["went_on"] = True
return out
`

type addOutcome struct {
	Value   map[string]float64 `json:"value"`
	Kind    string             `json:"kind"`
	Tool    string             `json:"tool"`
	Message string             `json:"message"`
	WentOn  bool               `json:"went_on"`
}

// approvalsOf reads the approvals of a named Run from the ledger under dataDir.
func approvalsOf(t *testing.T, dataDir, runID string) []budget.ApprovalRecord {
	t.Helper()
	led, err := sqlite.Open(context.Background(), dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	recs, err := led.Approvals(context.Background(), budget.RunRef{Tenant: "t", ID: "named:" + runID})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func decisions(recs []budget.ApprovalRecord) string {
	var out []string
	for _, r := range recs {
		s := string(r.Status)
		if r.AnsweredBy != "" {
			s += " by " + r.AnsweredBy
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// Must show 1 and 4: a program's call of a tool under approval_required is put to the person;
// accepted it runs exactly once and the program gets its value (the child waiting in a read,
// its CPU idle, its wall clock running); declined it never runs and the program sees kind
// denied; unanswered it is refused within the deadline and the program goes on. The ledger
// holds each decision, and the result counts them.
func TestApprovalsInProgram(t *testing.T) {
	cfg, counter, dataDir := approvalConfig(t, 3, false)
	cs, p, cmd := servePerson(t, cfg)
	const runID = "approvals-in-program"

	p.set("accept", func() { childWaitsIdle(t, cmd.Process.Pid) })
	var out addOutcome
	var full approvalResult
	runInto(t, cs, runID, callAdd, &out, &full)
	if out.Value["sum"] != 5 || out.Kind != "" || !out.WentOn {
		t.Errorf("accepted: %+v", out)
	}
	if n := counts(t, counter)["add"]; n != 1 {
		t.Errorf("accepted: the mock ran add %d times, want exactly 1", n)
	}
	if full.DurationSeconds < 1 {
		t.Errorf("the program took %.2fs while the person took over a second: its wall clock must run during the wait", full.DurationSeconds)
	}
	if a := full.Approvals; a.Asked != 1 || a.Accepted != 1 {
		t.Errorf("accepted: result approvals %+v", a)
	}

	p.set("decline", nil)
	out, full = addOutcome{}, approvalResult{}
	runInto(t, cs, runID, callAdd, &out, &full)
	if out.Kind != "denied" || out.Tool != "support__add" || !out.WentOn || !strings.Contains(out.Message, "declined") {
		t.Errorf("declined: %+v", out)
	}
	if n := counts(t, counter)["add"]; n != 1 {
		t.Errorf("declined: the mock ran add %d times in all, want still 1", n)
	}

	p.set("", nil)
	start := time.Now()
	out, full = addOutcome{}, approvalResult{}
	runInto(t, cs, runID, callAdd, &out, &full)
	took := time.Since(start)
	if out.Kind != "approval_required_in_program" || !out.WentOn || !strings.Contains(out.Message, "nobody answered") {
		t.Errorf("unanswered: %+v", out)
	}
	if took < 3*time.Second || took > 30*time.Second {
		t.Errorf("unanswered: the program returned after %v; want the 3s deadline, bounded", took)
	}
	if a := full.Approvals; a.Asked != 1 || a.TimedOut != 1 {
		t.Errorf("unanswered: result approvals %+v", a)
	}
	if n := counts(t, counter)["add"]; n != 1 {
		t.Errorf("the mock ran add %d times in all, want exactly 1", n)
	}
	qs := p.questions()
	if len(qs) != 3 || !strings.Contains(qs[0], "support__add") || !strings.Contains(qs[0], "  a = 2\n  b = 3\n") ||
		!strings.Contains(qs[0], "approval_required") {
		t.Errorf("questions %q", qs)
	}
	recs := approvalsOf(t, dataDir, runID)
	if got := decisions(recs); got != "accepted by ann@example.com, declined by ann@example.com, timed_out" {
		t.Errorf("ledger approvals: %s", got)
	}
	for _, r := range recs {
		if r.ExecutionID == "" || r.Tool != "support__add" {
			t.Errorf("ledger approval %+v: want a program's call of support__add", r)
		}
	}
}

// Must show 2 and 4: the same three outcomes for the model's direct call of an exposed tool
// under approval_required, listed to the host as destructive.
func TestApprovalsDirect(t *testing.T) {
	cfg, counter, dataDir := approvalConfig(t, 3, true)
	cs, p, _ := servePerson(t, cfg)
	const runID = "approvals-direct"
	settleListing(t, cs)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		destructive := tl.Annotations != nil && tl.Annotations.DestructiveHint != nil && *tl.Annotations.DestructiveHint
		if want := tl.Name == "support__add" || tl.Name == "support__create_record" || tl.Name == "support__delete-everything"; strings.HasPrefix(tl.Name, "support__") && destructive != want {
			t.Errorf("%s destructiveHint %v, want %v", tl.Name, destructive, want)
		}
	}
	direct := func() (*mcp.CallToolResult, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "support__add", Arguments: map[string]any{"a": 2, "b": 3},
			Meta: mcp.Meta{"mcp-sandbox/run": runID}})
		if err != nil {
			t.Fatalf("support__add: %v", err)
		}
		return res, time.Since(start)
	}
	p.set("accept", nil)
	if res, _ := direct(); res.IsError || !strings.Contains(testkit.Text(res), `"sum":5`) {
		t.Errorf("accepted: %v %s", res.IsError, testkit.Text(res))
	}
	p.set("decline", nil)
	if res, _ := direct(); !res.IsError || !strings.Contains(testkit.Text(res), "declined") || !strings.Contains(testkit.Text(res), "(denied)") {
		t.Errorf("declined: %v %s", res.IsError, testkit.Text(res))
	}
	p.set("", nil)
	res2, took := direct()
	if !res2.IsError || !strings.Contains(testkit.Text(res2), "approval_required_in_program") || took < 3*time.Second || took > 30*time.Second {
		t.Errorf("unanswered after %v: %v %s", took, res2.IsError, testkit.Text(res2))
	}
	if n := counts(t, counter)["add"]; n != 1 {
		t.Errorf("the mock ran add %d times, want exactly 1", n)
	}
	recs := approvalsOf(t, dataDir, runID)
	if got := decisions(recs); got != "accepted by ann@example.com, declined by ann@example.com, timed_out" {
		t.Errorf("ledger approvals: %s", got)
	}
	for _, r := range recs {
		if r.ExecutionID != "" {
			t.Errorf("a direct call's approval carries execution %q", r.ExecutionID)
		}
	}
}

// toolName finds model-facing tool names in a text.
var toolName = regexp.MustCompile(`[a-z0-9][a-z0-9_-]*__[A-Za-z0-9_.-]+`)

// Must show 3: a host that cannot ask (no elicitation capability, at either revision) gets a
// refusal that says the
// tool needs a person's approval and this host cannot ask, names no tool but the one refused
// and tells nobody to call another; the tool is never reached and nobody is asked. With
// exposure off (the default) a direct call is not even possible.
func TestApprovalsWithoutElicitation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expose bool
		so     *mcp.ClientSessionOptions
		why    string
	}{
		{"no elicitation", false, revisionElicit, "did not declare the elicitation capability"},
		{"revision 2026-07-28", false, nil, "did not declare the elicitation capability"},
		{"exposed, no elicitation", true, revisionElicit, "did not declare the elicitation capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, counter, dataDir := approvalConfig(t, 120, tc.expose)
			p := newPerson()
			cs, _ := serveProcWith(t, cfg, testkit.NewLog(t, "server"), nil, tc.so)
			host := hostTools(t, cs)
			check := func(where, msg string) {
				t.Helper()
				if !strings.Contains(msg, "needs a person's approval") || !strings.Contains(msg, "cannot ask") ||
					!strings.Contains(msg, tc.why) || strings.Contains(msg, "directly") {
					t.Errorf("%s: refusal %q", where, msg)
				}
				for _, n := range toolName.FindAllString(msg, -1) {
					if n != "support__add" && !host[n] {
						t.Errorf("%s: refusal names %s, which the host cannot call: %q", where, n, msg)
					}
				}
			}
			var out addOutcome
			var full approvalResult
			runInto(t, cs, "no-elicitation", callAdd, &out, &full)
			if out.Kind != "approval_required_in_program" || !out.WentOn || full.Approvals.Unasked != 1 || full.Approvals.Asked != 0 {
				t.Errorf("in a program: %+v, approvals %+v", out, full.Approvals)
			}
			check("in a program", out.Message)
			if tc.expose {
				res := call(t, cs, "support__add", map[string]any{"a": 2, "b": 3})
				if !res.IsError {
					t.Errorf("direct: %s", testkit.Text(res))
				}
				check("direct", testkit.Text(res))
			} else if host["support__add"] {
				t.Errorf("support__add is offered to the host with expose_upstream_tools false")
			}
			if n := counts(t, counter)["add"]; n != 0 || len(p.questions()) != 0 {
				t.Errorf("add ran %d times, %d questions asked; want neither", n, len(p.questions()))
			}
			if got := decisions(approvalsOf(t, dataDir, "no-elicitation")); got != "unasked" {
				t.Errorf("ledger approvals: %s", got)
			}
		})
	}
}

// Must show 4: a server killed while a person is being asked leaves the approval pending; the
// next start records it unknown, and the tool is never called.
func TestApprovalsRestartRecordsUnknown(t *testing.T) {
	cfg, counter, dataDir := approvalConfig(t, 120, false)
	cs, p, cmd := servePerson(t, cfg)
	const runID = "approvals-restart"
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Meta: mcp.Meta{"mcp-sandbox/run": runID},
			Arguments: map[string]any{"code": callAdd}})
	}()
	select {
	case <-p.open:
	case <-time.After(60 * time.Second):
		t.Fatal("the person was never asked")
	}
	if got := decisions(approvalsOf(t, dataDir, runID)); got != "pending" {
		t.Fatalf("while asking, the ledger holds %q, want pending", got)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cs.Wait()
	<-done

	serveProc(t, cfg, testkit.NewLog(t, "server")) // its start recovers the dead owner's records
	recs := approvalsOf(t, dataDir, runID)
	if got := decisions(recs); got != "unknown" || recs[0].DecidedAt.IsZero() {
		t.Errorf("after the restart the ledger holds %q, want unknown", got)
	}
	time.Sleep(500 * time.Millisecond)
	if n := counts(t, counter)["add"]; n != 0 {
		t.Errorf("the mock ran add %d times, want never", n)
	}
}

// childWaitsIdle checks, while a program waits for an approval, that its interpreter sleeps
// (state S: blocked in a read or poll of its channel) and burns no CPU over a second.
func childWaitsIdle(t *testing.T, serverPid int) {
	pids := descendants(serverPid, "python")
	if len(pids) == 0 {
		t.Errorf("no python process under the server (pid %d) while its program waits", serverPid)
		return
	}
	before := map[int]int64{}
	for _, pid := range pids {
		_, ticks, ok := procStat(pid)
		if ok {
			before[pid] = ticks
		}
	}
	time.Sleep(1200 * time.Millisecond)
	for pid, t0 := range before {
		state, t1, ok := procStat(pid)
		if !ok {
			continue
		}
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		t.Logf("waiting program: pid %d state %c wchan %s, %d CPU ticks in 1.2s", pid, state, wchan, t1-t0)
		if state != 'S' || t1-t0 > 20 {
			t.Errorf("pid %d is %c and used %d ticks of CPU in 1.2s while waiting for an approval; want S (asleep in a read) and about none", pid, state, t1-t0)
		}
	}
}

// procStat reads a process's state and its user+system CPU ticks.
func procStat(pid int) (state byte, ticks int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state is f[0]; utime, stime f[11], f[12]
	if len(f) < 13 {
		return 0, 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return f[0][0], u + st, true
}

// descendants returns the processes below root whose command name starts with prefix.
func descendants(root int, prefix string) []int {
	ents, _ := os.ReadDir("/proc")
	parent, comm := map[int]int{}, map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		start, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if start < 0 || end < start {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		comm[pid] = s[start+1 : end]
	}
	var out []int
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				if strings.HasPrefix(comm[pid], prefix) {
					out = append(out, pid)
				}
				break
			}
		}
	}
	return out
}
