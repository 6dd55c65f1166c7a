//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestInitHelperSkipsServerInits pins why the init helper starts cheaper than the server:
// it runs from internal/launch's package initialiser, which Go runs as soon as launch's own
// imports are initialised, so the packages only the server needs are never initialised in a
// sandbox child's helper. The runtime's init trace (GODEBUG=inittrace=1) lists every package
// initialiser that ran; `--version` is the control, showing the same packages do run there.
func TestInitHelperSkipsServerInits(t *testing.T) {
	serverOnly := []string{
		"github.com/prometheus/client_golang/prometheus",
		"github.com/prometheus/procfs",
		"google.golang.org/grpc",
		"modernc.org/libc",
		"github.com/google/jsonschema-go/jsonschema",
		"github.com/modelcontextprotocol/go-sdk/mcp",
		"github.com/mcp-sandbox/mcp-sandbox/configs",
	}
	inits := func(env []string, args ...string) map[string]bool {
		t.Helper()
		cmd := exec.Command(testkit.Binary(t), args...)
		cmd.Env = append(append(os.Environ(), "GODEBUG=inittrace=1"), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		ran := map[string]bool{}
		for _, line := range strings.Split(stderr.String(), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
				ran[f[1]] = true
			}
		}
		return ran
	}
	version := inits(nil, "--version")
	helper := inits([]string{launch.SpecEnv + `={"trial":true}`}, launch.Command)
	if !helper["github.com/landlock-lsm/go-landlock/landlock"] && !helper["golang.org/x/sys/unix"] {
		t.Fatalf("the helper's init trace lacks the packages it needs: %v", helper)
	}
	for _, p := range serverOnly {
		if !version[p] {
			t.Errorf("--version did not initialise %s: the control no longer holds, pick another server-only package", p)
		}
		if helper[p] {
			t.Errorf("the init helper initialised %s, a package only the server needs", p)
		}
	}
}
