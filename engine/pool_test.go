package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// poolBackend starts echoChildren: each says hello at once and answers run with its own
// number, so a test sees which child ran which program. It records the argv each was started
// with, and can be told to fail.
type poolBackend struct {
	started atomic.Int64
	fail    atomic.Bool
	// ended, when set, makes children report their output ended (as spawned children do) and
	// hold their Close until it is closed.
	ended chan struct{}
	// hold, when set, holds each start of a child started ahead (mode warm) until it is closed.
	hold chan struct{}

	mu       sync.Mutex
	modes    []string // argv's mode, per child in start order
	children []*echoChild
}

func (b *poolBackend) Name() string         { return "pool" }
func (b *poolBackend) Mechanisms() []string { return nil }

func (b *poolBackend) Start(_ context.Context, spec LaunchSpec) (Child, error) {
	if b.fail.Load() {
		return nil, fmt.Errorf("cannot start")
	}
	if b.hold != nil && spec.Argv[len(spec.Argv)-1] == "warm" {
		<-b.hold
	}
	n := b.started.Add(1)
	host, end := net.Pipe()
	c := &echoChild{n: n, host: host, end: end, exited: make(chan Exit, 1), played: make(chan struct{}), ended: b.ended}
	b.mu.Lock()
	b.modes = append(b.modes, spec.Argv[len(spec.Argv)-1])
	b.children = append(b.children, c)
	b.mu.Unlock()
	go c.play()
	if b.ended != nil {
		return echoEnded{c}, nil
	}
	return c, nil
}

func (b *poolBackend) alive() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.children {
		select {
		case <-c.played:
		default:
			n++
		}
	}
	return n
}

// echoChild is one child: hello, then run answered with done {value: n}.
type echoChild struct {
	n         int64
	host, end net.Conn
	killOnce  sync.Once
	exitOnce  sync.Once
	exited    chan Exit
	played    chan struct{}
	ended     chan struct{}
	closed    atomic.Bool
}

const echoHello = `{"type":"hello","version":1,"probe":{"pid":7,"uid":65534,"gid":65534,"groups":[65534],"canary":"unreadable","inet_socket":false,"inet6_socket":false,"reached_v4":false,"reached_v6":false,"routes":"unknown","rlimits":{"as":[536870912,536870912],"cpu":[10,10],"fsize":[10485760,10485760]},"env":["HOME","PATH"],"proc_pids":-1,"workspace_writable":true,"python":"3.11.2"}}`

func (c *echoChild) play() {
	defer close(c.played)
	defer c.exit(Exit{Code: -1, Signal: "killed"})
	if _, err := io.WriteString(c.end, echoHello+"\n"); err != nil {
		return
	}
	line, err := bufio.NewReader(c.end).ReadString('\n')
	if err != nil {
		return
	}
	var run struct{ Type string }
	if json.Unmarshal([]byte(line), &run) != nil || run.Type != "run" {
		return
	}
	_, _ = fmt.Fprintf(c.end, `{"type":"done","ok":true,"value":%d}`+"\n", c.n)
	_, _ = io.Copy(io.Discard, c.end) // until the host closes the channel
}

func (c *echoChild) exit(e Exit)                 { c.exitOnce.Do(func() { c.exited <- e }) }
func (c *echoChild) Channel() io.ReadWriteCloser { return c.host }
func (c *echoChild) Facts() Facts {
	return Facts{Cgroup: true, HostUID: 0, RunAsUID: 65534, ExclusiveUID: true}
}
func (c *echoChild) Wait() Exit {
	e := <-c.exited
	c.exited <- e
	return e
}
func (c *echoChild) Kill()             { c.killOnce.Do(func() { c.end.Close() }) }
func (c *echoChild) Workspace() string { return "" }
func (c *echoChild) Close() TreeUsage {
	c.Kill()
	<-c.played
	if c.ended != nil {
		<-c.ended
	}
	c.closed.Store(true)
	return TreeUsage{}
}

// echoEnded is an echoChild whose output streams end with its done, as a spawned child's do
// when no other process holds them.
type echoEnded struct{ *echoChild }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c echoEnded) OutputClosed() <-chan struct{} { return closedChan }

func poolRunner(t *testing.T, b Backend, w WarmPolicy) *Runner {
	t.Helper()
	r, err := NewRunner(b, &RunnerOptions{StateDir: t.TempDir(), Warm: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// eventually waits (bounded) for cond: pools fill in the background.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(gate.Scaled(10 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, gate.Scaled(10*time.Second))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runValue(t *testing.T, r *Runner, owner string, terms Terms) (int64, bool) {
	t.Helper()
	res := r.Run(context.Background(), Execution{Program: "x", Owner: owner, Terms: terms})
	if res.Failure != nil {
		t.Fatalf("%s: %s", res.Failure.Kind, res.Failure.Message)
	}
	var n int64
	if err := json.Unmarshal(res.Value, &n); err != nil {
		t.Fatal(err)
	}
	return n, res.Start == StartWarm
}

// A prewarmed pool holds Min children started ahead ("warm" in their argv), hands each out
// once, and refills while the execution runs; a miss starts a cold child and grows the pool.
func TestWarmPoolPrewarmTakeRefill(t *testing.T) {
	b := &poolBackend{}
	r := poolRunner(t, b, WarmPolicy{Min: 2, Max: 4})
	r.Prewarm("acme", Terms{})
	eventually(t, "two warm children", func() bool { return r.WarmStats().Idle == 2 })
	seen := map[int64]bool{}
	for i := range 6 {
		n, warm := runValue(t, r, "acme", Terms{})
		if seen[n] {
			t.Fatalf("run %d: child %d ran a second program", i, n)
		}
		seen[n] = true
		if i == 0 && !warm {
			t.Fatalf("the first run after Prewarm did not take a warm child")
		}
	}
	st := r.WarmStats()
	if st.Hits == 0 || st.Pools != 1 {
		t.Fatalf("stats %+v: want hits in one pool", st)
	}
	eventually(t, "the pool refilled to its grown target", func() bool {
		s := r.WarmStats()
		return s.Starting == 0 && s.Idle >= 2 && s.Idle <= 4
	})
	b.mu.Lock()
	warmModes := 0
	for _, m := range b.modes {
		if m == "warm" {
			warmModes++
		}
	}
	b.mu.Unlock()
	if warmModes < 2 {
		t.Fatalf("children started ahead carry mode warm: %v", b.modes)
	}
}

// An execution that finds its pool empty while a start is under way takes the child that
// start makes, and starts none of its own beside it (docs/design.md §19.6).
func TestWarmPoolMissTakesTheStartUnderWay(t *testing.T) {
	b := &poolBackend{hold: make(chan struct{})}
	r := poolRunner(t, b, WarmPolicy{Min: 1, Max: 1})
	r.Prewarm("acme", Terms{})
	eventually(t, "a start under way", func() bool { return r.WarmStats().Starting == 1 })
	done := make(chan *Outcome, 1)
	go func() { done <- r.Run(context.Background(), Execution{Program: "x", Owner: "acme"}) }()
	eventually(t, "the execution's miss", func() bool { return r.WarmStats().Misses == 1 })
	close(b.hold)
	res := <-done
	if res.Failure != nil {
		t.Fatalf("%s: %s", res.Failure.Kind, res.Failure.Message)
	}
	if string(res.Value) != "1" || res.Start != StartWarm {
		t.Fatalf("the execution ran on child %s (start %v), want the one under way (1, warm)", res.Value, res.Start)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.Contains(b.modes, "cold") {
		t.Fatalf("a child of its own was started beside the start under way: %v", b.modes)
	}
}

// A child started for one owner (tenant) or one set of terms is never handed to another.
func TestWarmPoolNeverSharedAcrossOwners(t *testing.T) {
	b := &poolBackend{}
	r := poolRunner(t, b, WarmPolicy{Min: 1, Max: 1})
	r.Prewarm("acme", Terms{})
	eventually(t, "acme's warm child", func() bool { return r.WarmStats().Idle == 1 })
	if _, warm := runValue(t, r, "globex", Terms{}); warm {
		t.Fatal("globex's execution took a child started for acme")
	}
	if _, warm := runValue(t, r, "acme", Terms{Limits: Limits{WallSeconds: 5}}); warm {
		t.Fatal("an execution under other terms took a child started for acme's default terms")
	}
	if _, warm := runValue(t, r, "acme", Terms{}); !warm {
		t.Fatal("acme's own execution found no warm child")
	}
}

// Unused for Idle, a pool shrinks back to Min; Close ends every child, idle or starting.
func TestWarmPoolShrinksAndCloses(t *testing.T) {
	b := &poolBackend{}
	r, err := NewRunner(b, &RunnerOptions{StateDir: t.TempDir(), Warm: WarmPolicy{Min: 1, Max: 4, Idle: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // back to back: the pool is found empty, and grows
		runValue(t, r, "acme", Terms{})
	}
	eventually(t, "the pool grown by demand", func() bool { return r.WarmStats().Idle >= 2 })
	eventually(t, "the idle pool back at min", func() bool { s := r.WarmStats(); return s.Idle == 1 && s.Starting == 0 })
	r.Close()
	if n := b.alive(); n != 0 {
		t.Fatalf("%d children still running after Close", n)
	}
	if _, warm := runValue(t, r, "acme", Terms{}); warm {
		t.Fatal("a closed Runner handed out a warm child")
	}
}

// A warm child that died while it waited is never handed out; a backend that cannot start
// children leaves the pool empty and every execution refused, not stuck.
func TestWarmPoolSkipsDeadChildren(t *testing.T) {
	b := &poolBackend{}
	r := poolRunner(t, b, WarmPolicy{Min: 1, Max: 1})
	r.Prewarm("acme", Terms{})
	eventually(t, "a warm child", func() bool { return r.WarmStats().Idle == 1 })
	b.mu.Lock()
	dying := b.children[0]
	b.mu.Unlock()
	dying.exit(Exit{Code: -1, Signal: "killed"})
	eventually(t, "its death noticed", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		p := r.pools[poolKey{owner: "acme", terms: r.Terms(Terms{})}]
		return len(p.idle) == 1 && p.idle[0].dead()
	})
	b.fail.Store(true)
	res := r.Run(context.Background(), Execution{Program: "x", Owner: "acme"})
	if res.Failure == nil || res.Start == StartWarm || res.Failure.Kind != "backend_unavailable" {
		t.Fatalf("got %+v: want the dead child skipped and a refusal from the failing backend", res.Failure)
	}
	b.fail.Store(false)
	if n, _ := runValue(t, r, "acme", Terms{}); n == dying.n {
		t.Fatal("the dead child was handed out")
	}
}

// A program that completed with its output ended gets its result at once; the child's end
// (kill, reap, cgroup and workspace) finishes in the background, and Close waits for it.
func TestCompletedResultBeforeTeardown(t *testing.T) {
	b := &poolBackend{ended: make(chan struct{})}
	r, err := NewRunner(b, &RunnerOptions{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := runValue(t, r, "acme", Terms{}); n != 1 {
		t.Fatalf("value %d", n)
	}
	b.mu.Lock()
	c := b.children[0]
	b.mu.Unlock()
	if c.closed.Load() {
		t.Fatal("the child's Close finished before Run returned, though it was held")
	}
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Runner.Close returned while a child's end was still in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(b.ended)
	<-closed
	if !c.closed.Load() {
		t.Fatal("Runner.Close returned before the child was closed")
	}
}
