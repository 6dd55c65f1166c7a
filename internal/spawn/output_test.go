package spawn

import (
	"bytes"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// A child's stdout and stderr reach their writers whole, nil discards, and Close returns once
// the child's last writer is gone.
func TestOutput(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		gate.Require(t, "sh", false, "no sh on PATH")
	}
	for _, discard := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		var o Output
		cmd := exec.Command(sh, "-c", "echo out; echo err >&2; head -c 100000 /dev/zero")
		var errW io.Writer = &stderr
		if discard {
			errW = nil
		}
		closeWrites, err := o.Attach(cmd, &stdout, errW)
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		closeWrites()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		o.Close(gate.Scaled(time.Minute)) // the copies end with the pipes: the grace is a bound, not a wait
		if want := "out\n"; stdout.Len() != len(want)+100000 || stdout.String()[:len(want)] != want {
			t.Errorf("stdout: %d bytes starting %q, want %q and 100000 zeros", stdout.Len(), stdout.String()[:min(stdout.Len(), 8)], want)
		}
		if !discard && stderr.String() != "err\n" {
			t.Errorf("stderr: %q", stderr.String())
		}
	}
}
