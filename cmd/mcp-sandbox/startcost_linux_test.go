//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestInitHelperSkipsServerInits pins why the init helper and `--version` start cheaper than
// the server: the helper runs from internal/launch's package initialiser, and `--version`
// from internal/early's, which Go runs as soon as their own imports are initialised, so the
// packages only the server needs are never initialised there. The runtime's init trace
// (GODEBUG=inittrace=1) lists every package initialiser that ran; `help` is the control,
// showing the same packages do run in a command main answers.
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
	// What the helper needs and --version does not: the seccomp assembler's tables and the
	// packages sorted before it that Go initialises first (encoding/gob among them).
	helperOnly := []string{
		"github.com/elastic/go-seccomp-bpf/arch",
		"encoding/json",
		"encoding/gob",
	}
	inits := func(env []string, args ...string) (map[string]bool, string) {
		t.Helper()
		cmd := exec.Command(testkit.Binary(t), args...)
		cmd.Env = append(append(os.Environ(), "GODEBUG=inittrace=1"), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		ran := map[string]bool{}
		for _, line := range strings.Split(stderr.String(), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
				ran[f[1]] = true
			}
		}
		return ran, stdout.String()
	}
	control, _ := inits(nil, "help")
	helper, _ := inits([]string{launch.SpecEnv + `={"trial":true}`}, launch.Command)
	if !helper["golang.org/x/sys/unix"] || !helper["encoding/json"] {
		t.Fatalf("the helper's init trace lacks the packages it needs: %v", helper)
	}
	// go-landlock's initialiser ran before the helper's until the helper made Landlock's system
	// calls itself; anything that brings it back into the binary puts it there again (it sorts
	// before launch and needs only x/sys/unix, as launch does).
	if helper["github.com/landlock-lsm/go-landlock/landlock"] {
		t.Error("the init helper initialised go-landlock")
	}
	for _, args := range [][]string{{"--version"}, {"-V"}, {"version"}} {
		version, out := inits(nil, args...)
		if out != early.Line() || !version["os"] {
			t.Errorf("%v printed %q with %d initialisers run; want %q after os's", args, out, len(version), early.Line())
		}
		for _, p := range append(append([]string(nil), serverOnly...), helperOnly...) {
			if version[p] {
				t.Errorf("%v initialised %s, which it does not need", args, p)
			}
		}
	}
	for _, p := range serverOnly {
		if !control[p] {
			t.Errorf("help did not initialise %s: the control no longer holds, pick another server-only package", p)
		}
		if helper[p] {
			t.Errorf("the init helper initialised %s, a package only the server needs", p)
		}
	}
	for _, p := range helperOnly {
		if !helper[p] {
			t.Errorf("the init helper did not initialise %s: the control of --version no longer holds, pick another", p)
		}
	}
}
