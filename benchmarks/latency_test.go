//go:build linux

package benchmarks

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/remote"
	"github.com/mcp-sandbox/mcp-sandbox/remote/service"
)

var report = flag.Bool("bench-report", false, "take enough samples for a report")

func TestMain(m *testing.M) {
	launch.MaybeMain()
	flag.Parse()
	os.Exit(testkit.Run(m))
}

func samples() int {
	if *report {
		return 40
	}
	return 3
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestReport prints the median latency of a trivial execution through the engine, per
// backend, with a cold start and with a warm child, beside a bare interpreter start, all
// sampled in turn so they see the same machine.
func TestReport(t *testing.T) {
	ctx := context.Background()
	pb, err := process.New(ctx, &process.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type subject struct {
		name   string
		runner engine.Sandbox
		runs   []time.Duration
		// settle is the pause before each sample: time for a warm runner's refill to finish,
		// as it would between turns.
		settle time.Duration
	}
	var subjects []*subject
	newRunner := func(b engine.Backend, warm int) *engine.Runner {
		r, err := engine.NewRunner(b, &engine.RunnerOptions{AllowSameUID: os.Geteuid() != 0, Warm: engine.WarmPolicy{Min: warm, Max: warm}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	add := func(name string, b engine.Backend, warm int) {
		subjects = append(subjects, &subject{name: name, runner: newRunner(b, warm), settle: 30 * time.Millisecond})
	}
	// addRemote measures the remote level: the remote backend, over loopback HTTP, to a
	// sandbox service in this process running b.
	addRemote := func(name string, b engine.Backend, warm int) {
		subjects = append(subjects, &subject{name: name, runner: remoteSandbox(t, newRunner(b, warm)), settle: 30 * time.Millisecond})
	}
	add("process level, cold start", pb, 0)
	add("process level, warm child (Warm: 1)", pb, 1)
	// Without a cgroup (no root, or none writable) the init helper stays as the tree's
	// subreaper: one more process start per execution.
	if pnc, err := process.New(ctx, &process.Options{Options: spawned.Options{Disable: []string{"cgroup"}}}); err == nil {
		add("process level, no cgroup (subreaper), cold start", pnc, 0)
	}
	local := engine.Backend(pb)
	if ok, why := namespaces.Available(&namespaces.Options{}); ok {
		nb, err := namespaces.New(ctx, &namespaces.Options{})
		if err != nil {
			t.Fatal(err)
		}
		add("isolated level (namespaces), cold start", nb, 0)
		add("isolated level (namespaces), warm child", nb, 1)
		local = nb
	} else {
		t.Logf("isolated level not measured: %s", why)
	}
	// The container level: a container per execution, started by the runtime's CLI. A warm
	// child is a container started ahead; its refill takes as long as a cold start, so the
	// samples leave it that long.
	if d := container.Detect(ctx, &container.Options{}); d.Available {
		for _, warm := range []int{0, 1} {
			cb, err := container.New(ctx, &container.Options{}) // one each: a Runner owns its backend
			if err != nil {
				t.Fatal(err)
			}
			s := &subject{name: "isolated level (container, " + d.Runtime.Kind + "), cold start", runner: newRunner(cb, 0), settle: 30 * time.Millisecond}
			if warm > 0 {
				s = &subject{name: "isolated level (container, " + d.Runtime.Kind + "), warm child", runner: newRunner(cb, 1), settle: 2 * time.Second}
			}
			subjects = append(subjects, s)
		}
		// The channel over the container's standard streams (a runtime in a VM gets it),
		// beside the socket: the same container, the frames relayed through the CLI.
		sb, err := container.New(ctx, &container.Options{Disable: []string{"socket"}})
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, &subject{name: "isolated level (container, " + d.Runtime.Kind + ", stream channel), cold start",
			runner: newRunner(sb, 0), settle: 30 * time.Millisecond})
	} else {
		t.Logf("container level not measured: %s", d.Reason)
	}
	addRemote("remote level (→ "+local.Name()+"), cold start", local, 0)
	addRemote("remote level (→ "+local.Name()+"), warm child", local, 1)
	py := pb.Python()
	var bare []time.Duration
	for i := 0; i < samples()+2; i++ {
		start := time.Now()
		if err := exec.Command(py, "-I", "-c", "pass").Run(); err != nil {
			t.Fatal(err)
		}
		d0 := time.Since(start)
		if i >= 2 { // the first runs warm the caches
			bare = append(bare, d0)
		}
		for _, s := range subjects {
			time.Sleep(s.settle)
			start := time.Now()
			res := s.runner.Run(ctx, engine.Execution{Program: "pass"})
			d := time.Since(start)
			if res.Failure != nil {
				t.Fatalf("%s: %s: %s", s.name, res.Failure.Kind, res.Failure.Message)
			}
			if i >= 2 {
				s.runs = append(s.runs, d)
			}
		}
	}
	mb := median(bare)
	row := func(name string, d time.Duration) string {
		return fmt.Sprintf("%-50s %9s  %5.2fx  %+9s", name, d.Round(10*time.Microsecond), float64(d)/float64(mb), (d - mb).Round(10*time.Microsecond))
	}
	out := fmt.Sprintf("median of %d samples each\n%-50s %9s  %6s  %9s\n%s", len(bare), "", "median", "ratio", "vs bare", row("bare "+py+" -I -c pass", mb))
	for _, s := range subjects {
		out += "\n" + row(s.name, median(s.runs))
	}
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}

// remoteSandbox serves r as a sandbox service on a loopback port for the rest of the test and
// returns the remote backend that reaches it.
func remoteSandbox(t *testing.T, r *engine.Runner) engine.Sandbox {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := &http.Server{Handler: service.New(&service.Options{Sandbox: r, Logger: quiet}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	sb, err := remote.New(&remote.Options{URL: "http://" + ln.Addr().String(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}
