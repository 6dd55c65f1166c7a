package remote_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/remote"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
)

// The service runs in this test binary, so a hostile program's processes live in the pid
// namespace gate.Main made, and the contract suite's scan of /proc for survivors sees them.
func TestMain(m *testing.M) {
	launch.MaybeMain()
	gate.Main()
	os.Exit(m.Run())
}

// serveOn serves h on a fresh loopback listener until t ends, and returns its base URL.
func serveOn(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

const testToken = "remote-contract-token"

// namespacesService is a sandbox service over the namespaces backend with hard limits
// ceiling, on loopback, accepting testToken.
func namespacesService(t *testing.T, ceiling engine.Limits, warm int) (url string, runner *engine.Runner) {
	t.Helper()
	ok, reason := namespaces.Available(namespaces.Options{})
	gate.Require(t, "namespaces", ok, reason)
	b, err := namespaces.New(context.Background(), namespaces.Options{})
	runner = sandboxtest.Runner(t, b, err, engine.RunnerOptions{Ceiling: ceiling, Isolation: engine.LevelIsolated,
		Artifacts: engine.ArtifactPolicy{Collect: true}, Warm: warm})
	svc := remote.NewService(remote.ServiceOptions{Sandbox: runner, Authenticate: func(tok string) (string, bool) {
		return "caller", tok == testToken
	}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Drain(ctx)
	})
	return serveOn(t, svc), runner
}

func client(t testing.TB, url string, ceiling engine.Limits, level engine.Level) *remote.Sandbox {
	t.Helper()
	sb, err := remote.New(remote.Options{URL: url, Ceiling: ceiling, Isolation: level,
		Bearer:    func(context.Context) (string, error) { return testToken, nil },
		Artifacts: engine.ArtifactPolicy{Collect: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// Must show 1: the contract suite, unchanged, over remote → sandbox service → namespaces on
// loopback, hostile programs included.
func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelIsolated,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			url, _ := namespacesService(t, ceiling, 0)
			return client(t, url, ceiling, engine.LevelIsolated)
		},
	})
}
