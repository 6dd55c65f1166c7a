package conformance

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// slowFirstStart is how long the upstream below takes before it answers initialize: what a
// first `npx -y` spends downloading its package (issue 23 measured a 30 s connect timeout
// killing that download).
const slowFirstStart = 45

// An upstream that takes 45 s before it answers initialize on its first start is waited for
// (the first-start timeout, minutes, not the 30 s connect timeout), with progress in the log,
// and a program then calls its tool.
func TestSlowFirstStartIsWaitedFor(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
data_dir: %[1]q
`+processProfile+`upstreams:
  slow: {command: ["sh", "-c", "sleep %[2]d; exec \"$0\"", %[3]q]}
tenants:
  t:
    upstreams: [slow]
    agents:
      default:
        code_execution: {}
`, filepath.Join(dir, "data"), slowFirstStart, built.mock)
	cs, _, cmd, _ := serveWithProc(t, cfg, nil)
	var v struct {
		Sum float64 `json:"sum"`
	}
	run(t, cs, `return await slow__add(a=2, b=3)`, &v)
	if v.Sum != 5 {
		t.Errorf("slow__add(2, 3) = %+v, want sum 5", v)
	}
	log := cmd.Stderr.(*testkit.Log).String()
	for _, want := range []string{"upstream server starting for the first time", "still starting: no answer to initialize yet"} {
		if !strings.Contains(log, want) {
			t.Errorf("the server log does not say %q while the upstream starts", want)
		}
	}
	if strings.Contains(log, "timed out while starting") || strings.Contains(log, "exited while starting") {
		t.Errorf("the slow start was given up on")
	}
}
