//go:build linux

package process_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// TestRefusedBeforeRunning: terms that ask for more than the backend reaches are refused from
// the child's first frame, before any program byte is sent, so a program that would have
// left a marker on the host leaves none.
func TestRefusedBeforeRunning(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	marker := filepath.Join(dir, "marker")
	program := "open(" + strconv.Quote(marker) + ", 'w').write('ran')"
	cases := []struct {
		name    string
		disable []string
		terms   engine.Terms
	}{
		{"isolated on the process backend", nil, engine.Terms{Isolation: engine.LevelIsolated}},
		{"no identity drop and same uid not allowed", []string{"identity"}, engine.Terms{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := process.New(context.Background(), &process.Options{Options: spawned.Options{Disable: append(tc.disable, "landlock")}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := engine.NewRunner(b, &engine.RunnerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res := r.Run(context.Background(), engine.Execution{Program: program, Terms: tc.terms})
			if res.Failure == nil || res.Failure.Kind != failure.IsolationUnavailable || res.Failure.Executed {
				t.Fatalf("want an isolation_unavailable refusal, got %+v", res.Failure)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the refused program ran: %s exists", marker)
			}
			t.Logf("refusal: %s", res.Failure.Message)
		})
	}
}
