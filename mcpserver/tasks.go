package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// run_code as an MCP task, revision 2025-11-25 (docs/design.md §14.6): a tools/call of
// run_code that carries a task field is answered at once with the task, and the program runs
// on, detached from the request, under the server's Drain. Tasks are kept in the ledger
// (budget.Tasks), so any process on it answers tasks/get, tasks/result and tasks/list, and
// they are their tenant's: another tenant's task id reads as unknown. The process running a
// task writes how it goes every poll interval, and reads back whether a tasks/cancel reached
// another process meanwhile, which it then carries out: the program's whole tree is killed.
//
// A client of 2026-07-28 gets the same tasks through the io.modelcontextprotocol/tasks
// extension (SEP-2663): it declares the extension in its request's client capabilities, the
// server its own in server/discover, and the answers take that revision's shapes (a result of
// resultType "task", tasks/get's detailed task with its result inline, tasks/cancel's empty
// result): modernRequest picks them per request. A question of its program goes through the
// task, answered by tasks/update (taskinput.go).
//
// go-sdk implements no tasks: the task methods are custom methods of its server (they pass
// its middleware like any other), and what its wire types cannot carry (the task field of a
// tools/call, the tasks capability, run_code's execution.taskSupport) taskwire.go carries.

// metaTask is the _meta key a tools/call's task field is moved under (taskwire.go), since
// go-sdk's CallToolParams has no field for it.
const metaTask = "mcp-sandbox/task"

// metaRelatedTask is the _meta key naming the task a message belongs to.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// The _meta keys of revision 2026-07-28 that say a request's revision and its client's
// capabilities, and the tasks extension's id.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	TasksExtension         = "io.modelcontextprotocol/tasks"
)

// taskPollInterval is what a client is told to wait between polls, and how often the process
// running a task writes its progress and reads whether it was cancelled elsewhere.
const taskPollInterval = time.Second

// DefaultTaskRetention is how long a task is kept when Options.TaskRetention is zero: the
// default of approvals.retention_hours.
const DefaultTaskRetention = 72 * time.Hour

// tasksListed bounds a tasks/list answer.
const tasksListed = 100

// wireOfTask is a task as the protocol shows it (2025-11-25's Task).
type wireOfTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

func wireTask(t budget.Task) wireOfTask {
	return wireOfTask{TaskID: t.ID, Status: string(t.Status), StatusMessage: t.Message,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: t.UpdatedAt.UTC().Format(time.RFC3339Nano),
		TTL: t.TTL.Milliseconds(), PollInterval: t.PollInterval.Milliseconds()}
}

// extensionTasks reports whether a request's _meta says it is of revision 2026-07-28 or later
// and its client declared the tasks extension (SEP-2663).
func extensionTasks(meta mcp.Meta) bool {
	if v, _ := meta[metaProtocolVersion].(string); v < revisionStateless {
		return false
	}
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// modernKey marks the context of a task method's request of revision 2026-07-28 or later
// (its MCP-Protocol-Version header, or its _meta, says so): its answers take the extension's
// shapes. The middleware sets it, since a custom method's handler sees no request.
type modernKey struct{}

// modernRequest reports whether req is of revision 2026-07-28 or later.
func modernRequest(req mcp.Request) bool {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil && ex.Header.Get(headerProtocolVersion) >= revisionStateless {
		return true
	}
	if p := req.GetParams(); p != nil {
		v, _ := p.GetMeta()[metaProtocolVersion].(string)
		return v >= revisionStateless
	}
	return false
}

// modernTask reports whether ctx is a task method's of revision 2026-07-28 or later.
func modernTask(ctx context.Context) bool {
	m, _ := ctx.Value(modernKey{}).(bool)
	return m
}

// taskV2 is a task as the tasks extension (2026-07-28) shows it: the fields of its Task, its
// ttl as ttlMs (null: kept without end), and, by status, the result inline (completed) or the
// error (failed), with the result's resultType.
type taskV2 struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	InputRequests  inputRequests   `json:"inputRequests,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"`
	ResultType     string          `json:"resultType"`
}

// taskV2Result answers a task method of 2026-07-28.
type taskV2Result struct {
	mcp.ResultBase
	taskV2
}

// doneV2 is tasks/cancel's answer in 2026-07-28: an empty complete result.
type doneV2 struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// extensionTask is t in the extension's shape; resultType "task" answers the tools/call that
// created it, "complete" a task method. A run_code result, failed program or not, is the
// task's completed result (its isError says the rest); a task lost with its server, or ended
// without a result, is failed, with the reason and (lost) the result saying what it had done
// as the error's data; a cancelled one carries its result (what the program had done) once
// the process that ran it has written it.
func extensionTask(t budget.Task, resultType string) taskV2 {
	w := wireTask(t)
	v := taskV2{TaskID: w.TaskID, Status: w.Status, StatusMessage: w.StatusMessage, CreatedAt: w.CreatedAt,
		LastUpdatedAt: w.LastUpdatedAt, PollIntervalMs: w.PollInterval, ResultType: resultType}
	if t.TTL > 0 {
		v.TTLMs = &w.TTL
	}
	if resultType == "task" {
		return v
	}
	switch {
	case t.Status == budget.TaskCompleted || (t.Status == budget.TaskFailed && t.Result != nil && t.Message != budget.TaskLost):
		v.Status = string(budget.TaskCompleted)
		v.Result = withResultType(t.Result)
	case t.Status == budget.TaskFailed:
		// Lost with its server (what it had done is the error's data), or ended with no result.
		v.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: t.Message, Data: t.Result}
	case t.Status == budget.TaskCancelled && t.Result != nil:
		// What the program had done when it was killed: SEP-2663's cancelled task has no
		// result, and a client that reads it strictly drops it.
		v.Result = withResultType(t.Result)
	}
	return v
}

// withResultType is a stored tools/call result marked complete, as 2026-07-28 reads results.
func withResultType(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// createTaskResult answers a task-augmented tools/call.
type createTaskResult struct {
	mcp.ResultBase
	Task wireOfTask `json:"task"`
}

// taskResult answers tasks/get and tasks/cancel: the task's fields at the top level.
type taskResult struct {
	mcp.ResultBase
	wireOfTask
}

// taskListResult answers tasks/list.
type taskListResult struct {
	mcp.ResultBase
	Tasks []wireOfTask `json:"tasks"`
}

// taskPayload answers tasks/result: the stored tools/call result, with the related task in
// its _meta.
type taskPayload struct {
	mcp.ResultBase
	raw json.RawMessage
	id  string
}

func (p *taskPayload) MarshalJSON() ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(p.raw, &m); err != nil {
		return nil, err
	}
	meta, _ := m["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[metaRelatedTask] = map[string]string{"taskId": p.id}
	m["_meta"] = meta
	return json.Marshal(m)
}

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// taskListParams are tasks/list's.
type taskListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// runningTasks are the tasks this process runs: id → what cancels its program and closes done
// once its end is written.
type runningTasks struct {
	mu  sync.Mutex
	run map[string]*runningTask
}

type runningTask struct {
	cancel    context.CancelFunc
	cancelled bool // by tasks/cancel (guarded by runningTasks.mu)
	done      chan struct{}
	// asking is the question the program waits on, while it does: the task is input_required
	// meanwhile (taskAsker).
	asking atomic.Pointer[approval.Question]
	// wake is poked when asking changes, so the status is written at once.
	wake chan struct{}
	// output is its output so far, for the status message (taskprogress.go).
	output partialOutput
	// calls are its program's bindings once they exist, whose calls so far are noted on the
	// task (taskcalls.go); noted is the last note written (the status writer's own, then, once
	// it stopped, the end's: runTask).
	calls atomic.Pointer[binding.Execution]
	noted []byte
}

// taskAsker is a task's approval.Asker, the task input_required while a question is put: in
// revision 2025-11-25 the question goes by elicitation on the session (via), as for any call
// of it; in the tasks extension (via nil) through the task itself, as its input request
// (taskinput.go), answered by tasks/update on any process. An answer from another path (the
// operator route) reaches the program through the approval Room as ever.
type taskAsker struct {
	via approval.Asker
	rt  *runningTask
}

func (a taskAsker) CanAsk() (bool, string) {
	if a.via == nil {
		return true, ""
	}
	return a.via.CanAsk()
}

func (a taskAsker) Ask(ctx context.Context, q approval.Question) (approval.Answer, error) {
	a.rt.asking.Store(&q)
	a.rt.poke()
	defer func() {
		a.rt.asking.Store(nil)
		a.rt.poke()
	}()
	if a.via == nil {
		// Its answer reaches the Room (tasks/update, the operator route), which withdraws it.
		<-ctx.Done()
		return approval.Answer{}, ctx.Err()
	}
	return a.via.Ask(ctx, q)
}

// poke wakes the task's status writer, if it is not awake already.
func (rt *runningTask) poke() {
	select {
	case rt.wake <- struct{}{}:
	default:
	}
}

// addTaskMethods registers the task methods on s and the middleware that starts a task.
func (h *handlers) addTaskMethods(s *mcp.Server) {
	h.tasks.run = map[string]*runningTask{}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "tasks/") {
				ctx = context.WithValue(ctx, modernKey{}, modernRequest(req))
			}
			if method == "tools/call" {
				if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params.Name == ToolRunCode {
					if ask, ok := cr.Params.Meta[metaTask]; ok {
						return h.startTask(ctx, cr, ask, false)
					}
					if extensionTasks(cr.Params.Meta) {
						return h.startTask(ctx, cr, nil, true)
					}
				}
			}
			return next(ctx, method, req)
		}
	})
	must := func(err error) {
		if err != nil {
			panic(err) // a method name go-sdk reserves: a programming error
		}
	}
	must(mcp.AddReceivingCustomMethod(s, "tasks/get", func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
		t, err := h.task(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		if modernTask(ctx) {
			v := extensionTask(t, "complete")
			if t.Status == budget.TaskInputRequired {
				if v.InputRequests, err = h.taskInput(ctx, t); err != nil {
					return nil, err
				}
				if len(v.InputRequests) == 0 {
					// Answered, and the program goes on: its status is written at once.
					v.Status = string(budget.TaskWorking)
				}
			}
			return &taskV2Result{taskV2: v}, nil
		}
		return &taskResult{wireOfTask: wireTask(t)}, nil
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/update", h.updateTask))
	must(mcp.AddReceivingCustomMethod(s, "tasks/result", h.taskResult))
	must(mcp.AddReceivingCustomMethod(s, "tasks/cancel", h.cancelTask))
	must(mcp.AddReceivingCustomMethod(s, "tasks/list", func(ctx context.Context, _ *mcp.ServerSession, _ *taskListParams) (*taskListResult, error) {
		ts, err := h.opts.Ledger.ListTasks(ctx, h.agent.Tenant, h.agent.Name, tasksListed)
		if err != nil {
			return nil, h.taskStoreError(err)
		}
		out := &taskListResult{Tasks: []wireOfTask{}}
		for _, t := range ts {
			if !h.taskExpired(t) {
				out.Tasks = append(out.Tasks, wireTask(t))
			}
		}
		return out, nil
	}))
}

// taskRetention is how long tasks are kept at most.
func (h *handlers) taskRetention() time.Duration {
	if h.opts.TaskRetention > 0 {
		return h.opts.TaskRetention
	}
	return DefaultTaskRetention
}

// taskExpired reports whether t is past its ttl.
func (h *handlers) taskExpired(t budget.Task) bool {
	return t.TTL > 0 && time.Since(t.CreatedAt) > t.TTL
}

// errTaskNotFound is the answer for a task id this tenant does not have: another tenant's
// reads exactly the same.
func errTaskNotFound(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task not found: %q", id)}
}

func (h *handlers) taskStoreError(err error) error {
	h.log.Error("task store", "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be read from the run ledger"}
}

// task is the tenant's task id, unexpired.
func (h *handlers) task(ctx context.Context, id string) (budget.Task, error) {
	t, err := h.opts.Ledger.Task(ctx, h.agent.Tenant, id)
	switch {
	case errors.Is(err, budget.ErrNotFound) || (err == nil && (t.Agent != h.agent.Name || h.taskExpired(t))):
		return t, errTaskNotFound(id)
	case err != nil:
		return t, h.taskStoreError(err)
	}
	switch {
	case t.Status == budget.TaskFailed && t.Result == nil:
		t.Result = h.lostResult(ctx, t, failure.Internal)
	case t.Status == budget.TaskCancelled && t.Result == nil && time.Since(t.UpdatedAt) >= cancelledResultWait:
		t.Result = h.lostResult(ctx, t, failure.Cancelled)
	}
	return t, nil
}

// lostResult is the result of a task whose program was lost with the server running it
// (Recover failed it; kind internal), or whose end that server never wrote after a cancel
// another recorded (kind cancelled): what it had done, as that server last noted it and the
// ledger's records of its calls since (lostCalls); a call in flight then reads unknown. It
// never ran again.
func (h *handlers) lostResult(ctx context.Context, t budget.Task, kind failure.Kind) json.RawMessage {
	m := &ModelResult{Failure: &engine.Failure{Kind: kind, Message: t.Message, Executed: true}}
	if t.ExecutionID != "" {
		m.ToolCalls, m.ToolCallsOmitted = h.lostCalls(ctx, t)
	}
	b, err := json.Marshal(&mcp.CallToolResult{IsError: true, StructuredContent: m, Content: []mcp.Content{&mcp.TextContent{Text: RenderText(m)}}})
	if err != nil {
		return nil
	}
	return b
}

// calledAs is a recorded call as a result's tool_calls list it (seq: its place in its
// execution).
func calledAs(seq int, c budget.CallRecord) binding.CallSummary {
	s := binding.CallSummary{Seq: seq, Tool: c.Tool, Kind: failure.Kind(c.Kind)}
	switch c.Status {
	case budget.Succeeded:
		s.Outcome = binding.CallOK
	case budget.Failed, budget.Refused:
		s.Outcome = binding.CallError
		if s.Kind == failure.Denied {
			s.Outcome = binding.CallDenied
		}
	default: // started, aborted, unknown: it went out, and how it ended is not known
		s.Outcome, s.Kind = binding.CallUnknown, ""
	}
	return s
}

// startTask creates the task a tools/call of run_code asked for (ask: its task field, with
// an optional ttl in milliseconds) and starts its program; the answer is the task, at once.
// modern answers in the shapes of the tasks extension (2026-07-28).
func (h *handlers) startTask(ctx context.Context, req *mcp.CallToolRequest, ask any, modern bool) (mcp.Result, error) {
	ttl := h.taskRetention()
	if m, ok := ask.(map[string]any); ok {
		if ms, ok := m["ttl"].(float64); ok && ms > 0 {
			ttl = min(ttl, time.Duration(ms)*time.Millisecond)
		}
	}
	now := time.Now()
	t := budget.Task{ID: budget.NewTaskID(), Tenant: h.agent.Tenant, Agent: h.agent.Name, Run: h.runOf(req).ID,
		Status: budget.TaskWorking, Message: "the program is starting", CreatedAt: now, UpdatedAt: now, TTL: ttl, PollInterval: taskPollInterval}
	if err := h.opts.Ledger.SaveTask(ctx, t); err != nil {
		h.log.Error("task not recorded", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be recorded in the run ledger, so nothing ran"}
	}
	created := func() (mcp.Result, error) {
		if modern {
			return &taskV2Result{taskV2: extensionTask(t, "task")}, nil
		}
		return &createTaskResult{Task: wireTask(t)}, nil
	}
	prog, bad := runCodeArgs(req)
	if bad != nil {
		h.endTask(t, budget.TaskFailed, "the arguments were refused; nothing ran", bad)
		return created()
	}
	// Detached from the request whole, values included: go-sdk sends what a handler's context
	// relates to its request (an elicitation) on that request's stream, which the answer
	// with the task has closed; unrelated, it goes on the session's own stream.
	tctx, end, ok := h.opts.Drain.begin(context.Background())
	if !ok {
		h.endTask(t, budget.TaskFailed, "the server is shutting down; nothing ran", toolError("the server is shutting down; nothing ran"))
		return created()
	}
	tctx, cancel := context.WithCancel(tctx)
	rt := &runningTask{cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	h.tasks.mu.Lock()
	h.tasks.run[t.ID] = rt
	h.tasks.mu.Unlock()
	h.log.Info("task started", "task", t.ID, "run", t.Run)
	go h.runTask(tctx, end, req, prog, t, rt, modern)
	return created()
}

// runTask runs the task's program and writes its end; meanwhile it writes how it goes each
// poll interval and carries out a cancel another process recorded. modern: the task is the
// extension's, whose questions are put through the task.
func (h *handlers) runTask(ctx context.Context, end func(), req *mcp.CallToolRequest, prog execution.Program, t budget.Task, rt *runningTask, modern bool) {
	defer end()
	defer close(rt.done)
	defer func() {
		h.tasks.mu.Lock()
		delete(h.tasks.run, t.ID)
		h.tasks.mu.Unlock()
	}()
	start := time.Now()
	watching, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(t.PollInterval)
		defer tick.Stop()
		for {
			select {
			case <-watching:
				return
			case <-tick.C:
			case <-rt.wake:
			}
			// A tick's writes go on when the program is cancelled meanwhile, within a bound: a
			// store that hangs does not keep the task from ending.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), execution.RecordTimeout)
			noted := h.noteCalls(wctx, t, rt) // first: a status read says what is noted
			status, msg := budget.TaskWorking, fmt.Sprintf("the program is running (%.0fs%s)%s", time.Since(start).Seconds(),
				callsSoFar(noted), h.outputSoFar(wctx, &rt.output))
			if q := rt.asking.Load(); q != nil {
				status, msg = budget.TaskInputRequired, fmt.Sprintf("the program waits for a person's approval of %s (approval %s)", q.Tool, q.ID)
			}
			cur, err := h.opts.Ledger.UpdateTask(wctx, t.Tenant, t.ID, status, msg, nil)
			cancel()
			if errors.Is(err, budget.ErrAlreadyFinished) && cur.Status == budget.TaskCancelled {
				h.tasks.mu.Lock()
				rt.cancelled = true
				h.tasks.mu.Unlock()
				rt.cancel()
				return
			}
		}
	}()
	asker := taskAsker{via: elicitationOf(req), rt: rt}
	if modern {
		asker.via = nil
	}
	env := callEnv{asking: h.asking(req, asker, ""), run: budget.RunRef{Tenant: t.Tenant, ID: t.Run}, started: func(executionID string) {
		if err := h.opts.Ledger.SetTaskExecution(context.WithoutCancel(ctx), t.Tenant, t.ID, executionID); err != nil {
			h.log.Error("task's execution not recorded", "task", t.ID, "err", err)
		}
	}}
	env.asking.Run = taskPauseKey(t.ID) // a task's questions are kept under it (taskinput.go)
	env.progress = rt.output.progress
	env.calls = func(x *binding.Execution) { rt.calls.Store(x) }
	// Once the program stopped: the status writer stops, the calls are noted as they ended
	// (what a task lost while its result is recorded lists), and the partial outputs are
	// dropped before the output is kept, so they do not take its room in the tenant's blob
	// quota. On a context of their own: a cancelled program's end is recorded all the same.
	env.ran = sync.OnceFunc(func() {
		close(watching)
		<-watched
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), execution.RecordTimeout)
		defer cancel()
		h.noteCalls(rctx, t, rt)
		h.dropPartials(rctx, &rt.output)
	})
	if ok, _ := env.asking.Asker.CanAsk(); ok {
		env.journal = cassette.NewJournal()
		env.asking.Journal = env.journal
	}
	res := h.execute(ctx, req, prog, env)
	env.ran() // when the execution was refused before its program ran
	out := h.render(res)
	h.tasks.mu.Lock()
	cancelled := rt.cancelled
	h.tasks.mu.Unlock()
	switch {
	case cancelled:
		h.endTask(t, budget.TaskCancelled, cancelledMessage, out)
	case out.IsError:
		h.endTask(t, budget.TaskFailed, "the program failed", out)
	default:
		h.endTask(t, budget.TaskCompleted, "the program completed", out)
	}
}

// callsSoFar says how many calls the task's program has made so far (", calls made so far: 3"):
// those admitted, each spent in the ledger, as noted (noteCalls); "" before its bindings exist.
func callsSoFar(noted *binding.CallsNoted) string {
	if noted == nil {
		return ""
	}
	return fmt.Sprintf(", calls made so far: %d", noted.Made)
}

// cancelledMessage is a cancelled task's status message once its end is written.
const cancelledMessage = "cancelled: the program's processes were killed"

// cancelledResultWait bounds how long after its cancel a task cancelled with no result yet
// waits for the one the process running it writes once it has killed the program (within a
// poll interval, and the end's recording): past it, what that process last noted and the
// ledger's records of its calls make its result (lostResult), as for a task whose server is
// gone, in tasks/result and in the extension's tasks/get alike.
const cancelledResultWait = 30 * time.Second

// endTask writes a task's end, unless it ended already; a cancel recorded by another process
// stands, and this is its result.
func (h *handlers) endTask(t budget.Task, status budget.TaskStatus, msg string, out *mcp.CallToolResult) {
	b, err := json.Marshal(out)
	if err != nil {
		h.log.Error("task result not encoded", "task", t.ID, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), execution.RecordTimeout)
	defer cancel()
	cur, err := h.opts.Ledger.UpdateTask(ctx, t.Tenant, t.ID, status, msg, b)
	if errors.Is(err, budget.ErrAlreadyFinished) && cur.Status == budget.TaskCancelled && cur.Result == nil {
		// Cancelled by another process, which has no result to give: this is it.
		status = budget.TaskCancelled
		_, err = h.opts.Ledger.UpdateTask(ctx, t.Tenant, t.ID, status, cancelledMessage, b)
	}
	if err != nil && !errors.Is(err, budget.ErrAlreadyFinished) {
		h.log.Error("task end not recorded", "task", t.ID, "err", err)
	}
	h.log.Info("task ended", "task", t.ID, "status", string(status))
}

// taskResult answers tasks/result: the tools/call result once the task has ended, waiting
// for it while it goes on.
func (h *handlers) taskResult(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*taskPayload, error) {
	for {
		t, err := h.task(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		if t.Status.Terminal() && (t.Result != nil || t.Status != budget.TaskCancelled) {
			if t.Result == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("task %s was %s with no result", t.ID, t.Status)}
			}
			return &taskPayload{raw: t.Result, id: t.ID}, nil
		}
		h.tasks.mu.Lock()
		rt := h.tasks.run[t.ID]
		h.tasks.mu.Unlock()
		var done <-chan struct{}
		if rt != nil {
			done = rt.done
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
		case <-time.After(t.PollInterval):
		}
	}
}

// cancelTask answers tasks/cancel: a task this process runs is killed and its end (cancelled,
// with what its program had done) written before the answer; one another process runs is
// recorded cancelled, which that process carries out at its next poll.
func (h *handlers) cancelTask(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
	t, err := h.task(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s is %s already: it cannot be cancelled", t.ID, t.Status)}
	}
	h.tasks.mu.Lock()
	rt := h.tasks.run[t.ID]
	if rt != nil {
		rt.cancelled = true
	}
	h.tasks.mu.Unlock()
	if rt != nil {
		rt.cancel()
		select {
		case <-rt.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else if _, err := h.opts.Ledger.UpdateTask(ctx, t.Tenant, t.ID, budget.TaskCancelled, "cancelled", nil); err != nil &&
		!errors.Is(err, budget.ErrAlreadyFinished) {
		return nil, h.taskStoreError(err)
	}
	if t, err = h.task(ctx, p.TaskID); err != nil {
		return nil, err
	}
	if modernTask(ctx) {
		return &doneV2{ResultType: "complete"}, nil
	}
	return &taskResult{wireOfTask: wireTask(t)}, nil
}
