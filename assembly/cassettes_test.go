package assembly

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
)

// sweepSeen is a cassette store whose sweeps are reported on swept once done.
type sweepSeen struct {
	budget.Cassettes
	swept chan int
}

func (s sweepSeen) SweepCassettes(ctx context.Context, cutoff time.Time) (int, error) {
	n, err := s.Cassettes.SweepCassettes(ctx, cutoff)
	s.swept <- n
	return n, err
}

// TestCassetteRetention: serve's cassette sweeper removes, from its first pass, the cassettes
// kept longer than approvals.retention_hours and leaves younger ones; the key's default is 72
// hours, and a retention of zero or less is a config error (and so is kept_bytes over 64MiB).
func TestCassetteRetention(t *testing.T) {
	cfg, err := configs.Parse([]byte("approvals: {retention_hours: 0.5}\ntenants: {t: {agents: {a: {}}}}\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Retention(); got != 30*time.Minute {
		t.Errorf("retention_hours 0.5 is a retention of %v, want 30m", got)
	}
	if def, _ := configs.Parse([]byte("tenants: {t: {agents: {a: {}}}}\n"), "test.yaml"); def.Retention() != 72*time.Hour {
		t.Errorf("the default retention is %v, want 72h", def.Retention())
	}
	if _, err := configs.Parse([]byte("approvals: {retention_hours: 0}\ntenants: {t: {agents: {a: {}}}}\n"), "test.yaml"); err == nil ||
		!strings.Contains(err.Error(), "approvals.retention_hours") {
		t.Errorf("retention_hours 0: %v, want an error naming the key", err)
	}
	if _, err := configs.Parse([]byte("cassettes: {kept_bytes: 65MiB}\ntenants: {t: {agents: {a: {}}}}\n"), "test.yaml"); err == nil ||
		!strings.Contains(err.Error(), "cassettes.kept_bytes") {
		t.Errorf("kept_bytes over 64MiB: %v, want an error naming the key", err)
	}

	l, err := sqlite.Open(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	store := sweepSeen{l, make(chan int)}
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if err := l.PutCassette(t.Context(), budget.Cassette{ExecutionID: "x_kept", Run: run, Data: []byte("c\n")}); err != nil {
		t.Fatal(err)
	}
	sweep := func(now func() time.Time) int {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); sweepCassettes(ctx, store, cfg.Retention(), now) }()
		n := <-store.swept
		cancel()
		<-done
		return n
	}
	if n := sweep(time.Now); n != 0 {
		t.Errorf("a sweep removed %d cassettes kept a moment ago, want 0", n)
	}
	if _, err := l.Cassette(t.Context(), "x_kept"); err != nil {
		t.Fatalf("a young cassette is gone: %v", err)
	}
	later := func() time.Time { return time.Now().Add(cfg.Retention() + time.Minute) }
	if n := sweep(later); n != 1 {
		t.Errorf("a sweep past the retention removed %d cassettes, want 1", n)
	}
	if _, err := l.Cassette(t.Context(), "x_kept"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("a cassette past the retention: %v, want ErrNotFound", err)
	}
}
