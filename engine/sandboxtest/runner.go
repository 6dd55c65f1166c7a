package sandboxtest

import (
	"os"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// Runner returns a Runner over the backend b that a constructor returned with err, closed
// when t ends. A host that is not root cannot drop to a sandbox identity, so there the
// Runner accepts the host's own (AllowSameUID).
func Runner(t testing.TB, b engine.Backend, err error, options *engine.RunnerOptions) *engine.Runner {
	t.Helper()
	if err != nil {
		t.Fatalf("the backend: %v", err)
	}
	var opts engine.RunnerOptions
	if options != nil {
		opts = *options
	}
	opts.AllowSameUID = opts.AllowSameUID || os.Geteuid() != 0
	r, err := engine.NewRunner(b, &opts)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
