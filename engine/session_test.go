package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// The protocol loop (session.drive) tested without Python: a fake child over a pipe replays
// the "child:" lines of a golden transcript, and the test compares what the engine wrote with
// its "host:" lines and the Outcome with its result section. go test ./engine -run
// TestSessionTranscripts -update rewrites both from what the engine does now; review the diff.
//
// A transcript (testdata/sessions/*.txtar) has a script section of lines, played in order:
//
//	child: RAW      the child writes RAW and a newline (any bytes: garbage and forged frames too)
//	host: FRAME     the child reads one line from the host (FRAME is what it must be)
//	do: release     the tool "slow" may return now (so overlapping calls answer in a known order)
//	do: close       the child closes its end of the channel
//	do: exit N      the child's main process exits with status N
//	do: cancel      the caller cancels the execution's context
//
// After the script the child reads until the channel closes, and every further host line is
// recorded too, so an unexpected write shows in the diff. A child that has not exited by then
// waits to be killed. An optional options section is JSON: wall_seconds, hello_ms, isolation.
var update = flag.Bool("update", false, "rewrite the golden session transcripts from what the engine does")

type sessionOptions struct {
	WallSeconds float64 `json:"wall_seconds"`
	HelloMS     int     `json:"hello_ms"`
	Isolation   Level   `json:"isolation"`
}

func TestSessionTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/sessions/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runTranscript(t, file)
		})
	}
}

func runTranscript(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	a := parseArchive(raw)
	var o sessionOptions
	if b := a.section("options"); b != "" {
		if err := json.Unmarshal([]byte(b), &o); err != nil {
			t.Fatalf("options: %v", err)
		}
	}
	if o.WallSeconds == 0 {
		o.WallSeconds = 5
	}
	// A busy machine takes longer to reach the program: the wall clock stretches with it, and
	// the result still reads as the transcript's.
	wall := o.WallSeconds * gate.Scale()
	script := strings.Split(strings.TrimRight(a.section("script"), "\n"), "\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tools := &fakeTools{gate: make(chan struct{})}
	b := &fakeBackend{script: script, cancel: cancel, tools: tools}
	opts := RunnerOptions{Ceiling: Limits{CPUSeconds: 10, WallSeconds: wall, MemoryBytes: 512 << 20,
		FileSizeBytes: 10 << 20, ProcessCount: 64}, StateDir: t.TempDir(), Isolation: o.Isolation}
	if o.HelloMS > 0 {
		opts.HelloTimeout = time.Duration(o.HelloMS) * time.Millisecond
	}
	r, err := NewRunner(b, &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res := r.Run(ctx, Execution{Program: "return 42", Tools: tools,
		ToolNames: []string{"docs__list-repos", "fast", "slow"}, Aliases: []string{"fast", "slow"}})
	got := b.child.transcript()
	outcome := strings.ReplaceAll(resultSection(res), fmt.Sprintf("wall_seconds=%g", wall), fmt.Sprintf("wall_seconds=%g", o.WallSeconds))
	if *update {
		if a.section("result") == "" {
			a.files = append(a.files, archiveFile{name: "result"})
		}
		for i := range a.files {
			switch a.files[i].name {
			case "script":
				a.files[i].data = got
			case "result":
				a.files[i].data = outcome
			}
		}
		if err := os.WriteFile(file, a.format(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := a.section("script"); got != want {
		t.Errorf("the host wrote (-want +got):\n%s", lineDiff(want, got))
	}
	if want := a.section("result"); outcome != want {
		t.Errorf("result:\n got %s\nwant %s", outcome, want)
	}
}

// resultSection is the part of an Outcome the protocol loop decides, one JSON object a line.
func resultSection(res *Outcome) string {
	v := map[string]any{"value": res.Value, "failure": res.Failure, "limit_hit": res.LimitHit,
		"cancelled": res.Cancelled, "isolation": res.Isolation}
	b, _ := json.Marshal(v)
	return string(b) + "\n"
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}

// fakeTools answers the program's calls: "slow" waits for the script's release, "denied" is
// refused, "big" is a handle, anything else echoes its arguments; a read returns two lines.
type fakeTools struct {
	gate chan struct{}
	once sync.Once
}

func (f *fakeTools) release() { f.once.Do(func() { close(f.gate) }) }

func (f *fakeTools) CallTool(ctx context.Context, name string, args json.RawMessage) toolcall.Answer {
	switch name {
	case "slow":
		select {
		case <-f.gate:
		case <-ctx.Done():
			return toolcall.Answer{Kind: failure.Cancelled, Message: "cancelled"}
		}
		return toolcall.Answer{Value: json.RawMessage(`"slow done"`)}
	case "denied":
		return toolcall.Answer{Kind: failure.Denied, Message: "denied is denied by this tenant's policy"}
	case "big":
		return toolcall.Answer{Handle: &toolcall.Handle{ID: "h_abc", Size: 20 << 20, Lines: 400000}}
	}
	return toolcall.Answer{Value: args}
}

func (f *fakeTools) ReadHandle(ctx context.Context, handle string, offset, limit int, pattern string) toolcall.Answer {
	return toolcall.Answer{Value: json.RawMessage(`"line 0\nline 1\n"`)}
}

// fakeBackend starts one fakeChild that plays script.
type fakeBackend struct {
	script []string
	cancel context.CancelFunc
	tools  *fakeTools
	child  *fakeChild
}

func (b *fakeBackend) Name() string         { return "fake" }
func (b *fakeBackend) Mechanisms() []string { return nil }

func (b *fakeBackend) Start(ctx context.Context, spec LaunchSpec) (Child, error) {
	host, child := net.Pipe()
	c := &fakeChild{host: host, end: child, killed: make(chan struct{}), exited: make(chan Exit, 1), played: make(chan struct{})}
	b.child = c
	go c.play(b)
	return c, nil
}

// fakeChild is the child's side: it plays the script on its own goroutine, which Close waits for.
type fakeChild struct {
	host, end net.Conn
	killOnce  sync.Once
	killed    chan struct{}
	exitOnce  sync.Once
	exited    chan Exit
	played    chan struct{}

	mu  sync.Mutex
	out []string // the transcript as played
}

func (c *fakeChild) record(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out = append(c.out, line)
}

func (c *fakeChild) transcript() string {
	<-c.played
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.out, "\n") + "\n"
}

func (c *fakeChild) exit(e Exit) { c.exitOnce.Do(func() { c.exited <- e }) }

func (c *fakeChild) play(b *fakeBackend) {
	defer close(c.played)
	rd := bufio.NewReader(c.end)
	readHost := func() (string, bool) {
		line, err := rd.ReadString('\n')
		if err != nil {
			return "", false
		}
		return strings.TrimSuffix(line, "\n"), true
	}
	for _, line := range b.script {
		verb, arg, _ := strings.Cut(line, ": ")
		switch verb {
		case "child":
			c.record(line)
			if _, err := io.WriteString(c.end, arg+"\n"); err != nil {
				c.record("# the child's write failed: the host closed the channel")
			}
		case "host":
			if got, ok := readHost(); ok {
				c.record("host: " + got)
			} else {
				c.record("host: <closed>")
			}
		case "do":
			c.record(line)
			switch {
			case arg == "release":
				b.tools.release()
			case arg == "close":
				c.end.Close()
			case arg == "cancel":
				b.cancel()
			case strings.HasPrefix(arg, "exit "):
				n, _ := strconv.Atoi(strings.TrimPrefix(arg, "exit "))
				c.exit(Exit{Code: n})
			}
		default:
			c.record(line) // comments and blank lines are kept as they are
		}
	}
	for {
		got, ok := readHost()
		if !ok {
			break
		}
		c.record("host: " + got)
	}
	select {
	case <-c.killed:
	case <-time.After(gate.Scaled(10 * time.Second)):
	}
	c.exit(Exit{Code: -1, Signal: "killed"})
}

func (c *fakeChild) Channel() io.ReadWriteCloser { return c.host }

func (c *fakeChild) Facts() Facts {
	return Facts{Cgroup: true, HostUID: 0, RunAsUID: 65534, ExclusiveUID: true}
}

func (c *fakeChild) Wait() Exit {
	e := <-c.exited
	c.exited <- e
	return e
}

func (c *fakeChild) Kill() {
	c.killOnce.Do(func() {
		close(c.killed)
		c.end.Close()
	})
}

func (c *fakeChild) Workspace() string { return "" }

func (c *fakeChild) Close() TreeUsage {
	c.Kill()
	<-c.played
	return TreeUsage{}
}

// archive is a txtar archive (a comment, then files each opened by a "-- name --" line),
// read and written here rather than taken from golang.org/x/tools for one test.
type archive struct {
	comment string
	files   []archiveFile
}

type archiveFile struct {
	name string
	data string
}

func parseArchive(b []byte) archive {
	var a archive
	cur := &a.comment
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "-- "); ok && strings.HasSuffix(name, " --") {
			a.files = append(a.files, archiveFile{name: strings.TrimSuffix(name, " --")})
			cur = &a.files[len(a.files)-1].data
			continue
		}
		*cur += line
	}
	return a
}

func (a archive) format() []byte {
	var b bytes.Buffer
	b.WriteString(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n%s", f.name, f.data)
	}
	return b.Bytes()
}

func (a archive) section(name string) string {
	for _, f := range a.files {
		if f.name == name {
			return f.data
		}
	}
	return ""
}
