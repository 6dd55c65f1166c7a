package testkit

import (
	"io"
	"os/exec"
	"testing"
)

// StartPiped starts cmd with its stdin and stdout held by the test, and returns them; a pipe
// or a start that fails fails t. Waiting for cmd is the caller's, after it closes stdin.
func StartPiped(t testing.TB, cmd *exec.Cmd) (stdin io.WriteCloser, stdout io.ReadCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, stdout
}
