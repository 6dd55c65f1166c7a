//go:build unix

package python

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// A child started without site (-S, the stub appending what the probe said site adds) sees
// the sys.path and sys.prefix an interpreter started with site sees, in the same order, and
// site's builtins; only site's own import is skipped. Real interpreter, real probe; and the
// same for a virtual environment's interpreter, whose sys.prefix only site sets.
func TestStartWithoutSite(t *testing.T) {
	py, err := exec.LookPath("python3")
	gate.Require(t, "python", err == nil, "python3 is not on PATH")
	t.Run("system", func(t *testing.T) { startWithoutSite(t, py) })
	t.Run("venv", func(t *testing.T) {
		venv := filepath.Join(t.TempDir(), "venv")
		out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput()
		gate.Require(t, "python-venv", err == nil, fmt.Sprintf("python3 -m venv failed (apt-get install python3-venv): %v %s", err, out))
		startWithoutSite(t, filepath.Join(venv, "bin", "python3"))
	})
}

func startWithoutSite(t *testing.T, py string) {
	source := "import sys, json\nprint(json.dumps({'path': sys.path, 'prefix': [sys.prefix, sys.exec_prefix], 'no_site': sys.flags.no_site, 'site': 'site' in sys.modules, " +
		"'builtins': [callable(getattr(__builtins__, n, None)) for n in ('exit', 'quit', 'help', 'copyright', 'credits', 'license')], " +
		"'argv': sys.argv}))\n"
	info, err := Inspect(context.Background(), py, source)
	if err != nil {
		t.Fatal(err)
	}
	if !info.NoSite || info.Code == "" {
		t.Fatalf("the probe did not say what site adds, or did not compile: %+v", info)
	}
	run := func(argv ...string) string {
		t.Helper()
		cmd := exec.Command(py, argv...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", argv[:2], err)
		}
		return strings.TrimSpace(string(out))
	}
	argv := []string{"-I", "-c", source, "a", "b"}
	got := info.Argv(argv, source)
	if !slices.Equal(got[:3], []string{"-I", "-S", "-c"}) {
		t.Fatalf("argv = %q, want it to start -I -S -c", got[:3])
	}
	without, with := run(got...), run(argv...)
	// The interpreter with site: the same path, site imported and the builtins there.
	wantWith := strings.Replace(without, `"no_site": 1, "site": false`, `"no_site": 0, "site": true`, 1)
	if with != wantWith {
		t.Errorf("started without site:\n%s\nwith site:\n%s", without, with)
	}
	if !strings.Contains(without, `"builtins": [true, true, true, true, true, true]`) || !strings.Contains(without, `"argv": ["-c", "a", "b"]`) {
		t.Errorf("site's builtins or the program's arguments are not as site would leave them: %s", without)
	}
	// An interpreter whose site adds nothing still starts without it: -S with an empty list.
	bare := Info{Code: info.Code, NoSite: true, Prefix: info.Prefix, ExecPrefix: info.ExecPrefix}
	if out := run(bare.Argv(argv, source)...); !strings.Contains(out, `"no_site": 1`) || !strings.Contains(out, `"argv": ["-c", "a", "b"]`) {
		t.Errorf("with nothing from site: %s", out)
	}
}
