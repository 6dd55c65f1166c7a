package conformance

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// The helpers here run a host as a user would, with no way off the machine: Claude Code from
// npm (offlineClaude), and any command in a network namespace of the test's own with only
// loopback up (offlineCommand), where a registry of the test's own may be served.

// offlineCommand returns name args run in a fresh network namespace with only loopback up
// (testdata/loopback-only.py sets it up, then runs them), so nothing it starts can send a byte
// off the machine, structurally. With serve set, that directory is served over HTTP on
// 127.0.0.1:port inside the namespace while the command runs. It needs root (CLONE_NEWNET).
func offlineCommand(t *testing.T, serve string, port int, name string, args ...string) *exec.Cmd {
	t.Helper()
	gate.Require(t, "root", os.Geteuid() == 0, "a network namespace of the test's own needs root")
	// The interpreter itself, not a shim (pyenv's) that needs a PATH the command may not have.
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	gate.Require(t, "python", err == nil, "python3 sets the namespace's loopback up: "+fmtErr(err))
	python := strings.TrimSpace(string(out))
	script, err := filepath.Abs(filepath.Join("testdata", "loopback-only.py"))
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{script}
	if serve != "" {
		argv = append(argv, "--serve", serve, strconv.Itoa(port))
	}
	argv = append(append(argv, "--", name), args...)
	cmd := exec.Command(python, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true}
	return cmd
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// offlineClaude is Claude Code as npm installs it (conformance/package.json pins it): its
// native binary, its environment a temporary HOME and everything that would reach out turned
// off (the autoupdater, telemetry, error reports, nonessential traffic). It runs in a
// network namespace with only loopback (offlineCommand) besides. path is prepended to a
// minimal PATH (or is all of it: set path).
type offlineClaude struct {
	bin, home string
	path      string // PATH
}

func newOfflineClaude(t *testing.T, path ...string) *offlineClaude {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("node_modules", "@anthropic-ai", "claude-code", "bin", "claude.exe"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(bin)
	gate.Require(t, "npm-peers", err == nil, "Claude Code is not installed (run `npm ci --prefix conformance`): "+fmtErr(err))
	return &offlineClaude{bin: bin, home: t.TempDir(), path: strings.Join(append(path, "/usr/local/bin", "/usr/bin", "/bin"), ":")}
}

func (c *offlineClaude) env(extra ...string) []string {
	return append([]string{
		"HOME=" + c.home, "PATH=" + c.path,
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1", "TMPDIR=" + os.TempDir(),
	}, extra...)
}

// run runs `claude args...` in its own network namespace (serving serve on port there, when
// set), in its HOME, with extra environment, bounded, and returns its output.
func (c *offlineClaude) run(t *testing.T, serve string, port int, extra []string, args ...string) string {
	t.Helper()
	cmd := offlineCommand(t, serve, port, c.bin, args...)
	cmd.Dir, cmd.Env = c.home, c.env(extra...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	case <-time.After(gate.Scaled(3 * time.Minute)):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("claude %s did not end within 3 minutes:\n%s", strings.Join(args, " "), out.String())
	}
	return out.String()
}

// connected is the line `claude mcp list` prints for server, when it says the server is
// connected with its tools fetched ("✔ Connected", not "! Connected · tools fetch failed").
func connected(list, server string) bool {
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, server+": ") && strings.HasSuffix(strings.TrimSpace(line), "✔ Connected") {
			return true
		}
	}
	return false
}

// noneTagged waits, bounded, until no live process carries name=value, and fails t naming
// what is left.
func noneTagged(t *testing.T, what, name, value string) {
	t.Helper()
	deadline := time.Now().Add(gate.Scaled(15 * time.Second))
	for len(testkit.Tagged(name, value)) > 0 {
		if time.Now().After(deadline) {
			left := testkit.Tagged(name, value)
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes of %s outlived it: %v", what, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
