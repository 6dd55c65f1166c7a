package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// module is the main module's path. Both programs are built in their own module's directory
// (go build -C), whichever module the test runs in (deploy/k8stest is one of its own).
const module = "github.com/mcp-sandbox/mcp-sandbox"

var (
	running atomic.Bool // Run is under way: what the kit builds will be removed

	dirOnce sync.Once
	dir     string
	dirErr  error

	// mcp-sandbox is built as make build builds it: with the init helper alone embedded, from
	// the overlay its recipe writes (internal/inithelper/overlay).
	sandbox = program{name: "mcp-sandbox", dir: ".", pkg: "./cmd/mcp-sandbox", overlay: "./internal/inithelper/overlay"}
	mock    = program{name: "mockupstream", dir: "conformance/mockupstream", pkg: "."}
)

// Run runs m's tests, after setup when given (a TestMain that wants a path before any test
// runs: BuildBinary, BuildMockUpstream), and then removes what the kit built. A package whose
// tests use the kit's builds says in its TestMain: os.Exit(testkit.Run(m)). It returns the
// exit code.
func Run(m *testing.M, setup ...func() error) int {
	running.Store(true)
	defer func() {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}()
	for _, f := range setup {
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// Binary is BuildBinary for a test: the path of mcp-sandbox, or the test fails.
func Binary(t testing.TB) string {
	t.Helper()
	return built(t, BuildBinary)
}

// MockUpstream is BuildMockUpstream for a test: the path of the mock upstream, or the test
// fails.
func MockUpstream(t testing.TB) string {
	t.Helper()
	return built(t, BuildMockUpstream)
}

// built is the path build returns, or t fails with its error.
func built(t testing.TB, build func() (string, error)) string {
	t.Helper()
	p, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// BuildBinary builds mcp-sandbox once per test process and returns its path.
func BuildBinary() (string, error) { return sandbox.build() }

// BuildMockUpstream builds the mock upstream (conformance/mockupstream, a module of its own
// built with mark3labs/mcp-go, an MCP implementation independent of ours) once per test
// process and returns its path. It serves stdio, or streamable HTTP with --http ADDR.
func BuildMockUpstream() (string, error) { return mock.build() }

// program is one binary the kit builds.
type program struct {
	name string
	dir  string // its module's directory, relative to the main module's root
	pkg  string // its package, relative to dir
	// overlay, when set, is a program (relative to dir) that writes the build's overlay.json
	// to the directory its -o names.
	overlay string
	once    sync.Once
	path    string
	err     error
}

func (p *program) build() (string, error) {
	if !running.Load() {
		return "", errors.New("testkit: the package's TestMain must run its tests through testkit.Run, which removes what the kit builds")
	}
	p.once.Do(func() {
		dirOnce.Do(func() {
			dir, dirErr = os.MkdirTemp("", "mcp-sandbox-testkit-")
			if dirErr == nil {
				// Searchable by any uid, as an installed binary's directory is: the namespaces
				// backend's templates exec the binary as an unprivileged host uid.
				dirErr = os.Chmod(dir, 0o755)
			}
		})
		if dirErr != nil {
			p.err = dirErr
			return
		}
		root, err := moduleRoot()
		if err != nil {
			p.err = err
			return
		}
		out := filepath.Join(dir, p.name)
		args := []string{"build", "-C", filepath.Join(root, p.dir), "-o", out}
		if p.overlay != "" {
			o := filepath.Join(dir, p.name+"-overlay")
			cmd := exec.Command("go", "run", p.overlay, "-o", o)
			cmd.Dir = filepath.Join(root, p.dir)
			if b, err := cmd.CombinedOutput(); err != nil {
				p.err = fmt.Errorf("testkit: go run %s -o %s: %v\n%s", p.overlay, o, err, b)
				return
			}
			args = append(args, "-overlay", filepath.Join(o, "overlay.json"))
		}
		args = append(args, p.pkg)
		if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			p.err = fmt.Errorf("testkit: go %s: %v\n%s", strings.Join(args, " "), err, b)
			return
		}
		p.path = out
	})
	return p.path, p.err
}

// moduleRoot is the directory of the main module, as the module of the test's working
// directory (its package's) sees it: itself, or the target of a replace.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("testkit: finding the module's root: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}
