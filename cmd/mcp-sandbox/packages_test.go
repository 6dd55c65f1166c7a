//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// A profile's python may be a virtual environment's interpreter: every backend runs it as
// that environment (its sys.prefix, its site-packages) and makes its packages importable,
// read-only. The venv is made here without the network (no pip: a package of its own is
// written into site-packages), under the system temporary directory, which the isolated
// backends cover with a tmpfs of their own.
func TestVenvPackagesImportAtEveryLevel(t *testing.T) {
	dir := t.TempDir()
	// The sandbox identity (65534 when the tests run as root) must reach the venv. The
	// system temporary directory itself is left as it is (1777): only the test's own
	// directories below it are opened.
	for d := dir; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	site, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if err != nil || len(site) != 1 {
		t.Fatalf("site-packages of the venv: %v %v", site, err)
	}
	pkg := filepath.Join(site[0], "mcps_venv_probe")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), []byte("VALUE = 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	program := `import os, sys, mcps_venv_probe
try:
    open(os.path.join(os.path.dirname(mcps_venv_probe.__file__), "planted.py"), "w").write("x")
    writable = True
except OSError:
    writable = False
[mcps_venv_probe.VALUE, sys.prefix, writable]`

	atEveryLevel(t, filepath.Join(venv, "bin", "python3"), program, func(t *testing.T, got []any) {
		if len(got) != 3 || got[0] != float64(42) || got[1] != venv {
			t.Errorf("got %v; want 42 imported with sys.prefix the venv %s", got, venv)
		}
		if len(got) == 3 && got[2] != false {
			t.Errorf("the program could write into the venv's site-packages")
		}
	})
	if _, err := os.Stat(filepath.Join(pkg, "planted.py")); err == nil {
		t.Errorf("a program planted a file in the venv")
	}
}

// Debian's python3-numpy, installed for the system interpreter (the default python), imports
// at every level: its files and the BLAS it loads through /etc/alternatives are visible,
// read-only.
func TestDebianNumpyImportsAtEveryLevel(t *testing.T) {
	err := exec.Command("/usr/bin/python3", "-c", "import numpy").Run()
	gate.Require(t, "python3-numpy", err == nil, "Debian's python3-numpy is not installed (apt-get install python3-numpy)")
	program := "import numpy as np\n[float(np.linalg.inv(np.array([[2.0, 0.0], [0.0, 4.0]])).sum()), np.__file__]"
	atEveryLevel(t, "/usr/bin/python3", program, func(t *testing.T, got []any) {
		if len(got) != 2 || got[0] != 0.75 {
			t.Errorf("got %v, want 0.75 from numpy", got)
		}
	})
}

// atEveryLevel runs program through the built binary with python as the profile's interpreter
// on the process, namespaces and bwrap backends (each gated on this host having it, as the
// built binary's doctor finds it), and hands check the program's value, a JSON list. A backend that runs here but
// cannot reach the isolated level (bwrap without root, say) is gated the same way.
func atEveryLevel(t *testing.T, python, program string, check func(t *testing.T, got []any)) {
	// The built binary's doctor, not this test binary: only the former is an init helper.
	out, _, _ := runCLI(t, "", "doctor", "--json")
	var doc struct {
		Backends []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
		} `json:"backends"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	available := map[string]string{}
	for _, b := range doc.Backends {
		if !b.Available {
			available[b.Name] = b.Reason
		}
	}
	for _, c := range []struct{ backend, isolation string }{{"process", "process"}, {"namespaces", "isolated"}, {"bwrap", "isolated"}} {
		t.Run(c.backend, func(t *testing.T) {
			why, missing := available[c.backend]
			gate.Require(t, c.backend, !missing, why)
			cfg := filepath.Join(t.TempDir(), "c.yaml")
			os.WriteFile(cfg, []byte("profiles:\n  default:\n    backend: "+c.backend+"\n    isolation: "+c.isolation+
				"\n    python: "+strconv.Quote(python)+
				"\n    allow_same_uid: "+strconv.FormatBool(os.Geteuid() != 0)+
				"\ntenants:\n  t: {agents: {a: {code_execution: {isolation: "+c.isolation+"}}}}\n"), 0o644)
			out, errOut, code := runCLI(t, program, "run", "--config", cfg, "-")
			r := decodeResult(t, out)
			if f := r.Failure; f != nil && f.Kind == "isolation_unavailable" && !f.Executed {
				gate.Require(t, c.backend, false, f.Message)
			}
			if code != 0 || r.Failure != nil {
				t.Fatalf("exit %d, failure %+v\nstderr: %s", code, r.Failure, errOut)
			}
			var got []any
			if err := json.Unmarshal(r.Value, &got); err != nil {
				t.Fatalf("value %s", r.Value)
			}
			check(t, got)
		})
	}
}
