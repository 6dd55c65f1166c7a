//go:build linux

package launch

import (
	"strings"
	"testing"
)

// TestLimitedSource: an init that execs the interpreter itself (Spec.ExecsProgram) has the
// source after -c set the rlimits first, after its first line (the bootstrap's), and refuses
// an interpreter not started with -c rather than start it unlimited.
func TestLimitedSource(t *testing.T) {
	s := Spec{Rlimits: Rlimits{CPUSeconds: 10, CPUHard: 11, AS: 1 << 29, NoFile: 1024}}
	argv := []string{"/usr/bin/python3", "-I", "-S", "-c", "# mcp-sandbox bootstrap (compiled)\nimport sys\nrun()", "code", "arg"}
	got, err := limitedSource(argv, s.limits(64))
	if err != nil {
		t.Fatal(err)
	}
	want := "# mcp-sandbox bootstrap (compiled)\nimport resource as _r\n_r.setrlimit(4, (0, 0))\n_r.setrlimit(0, (10, 11))\n" +
		"_r.setrlimit(9, (536870912, 536870912))\n_r.setrlimit(6, (64, 64))\n_r.setrlimit(7, (1024, 1024))\ndel _r\nimport sys\nrun()"
	if got[4] != want {
		t.Errorf("the source:\n%s\nwant:\n%s", got[4], want)
	}
	if strings.Join(got[:4], " ") != "/usr/bin/python3 -I -S -c" || got[5] != "code" || got[6] != "arg" || argv[4] == got[4] {
		t.Errorf("argv %q: only the source may change, in a copy", got)
	}
	if _, err := limitedSource([]string{"/usr/bin/node", "server.js"}, s.limits(0)); err == nil {
		t.Error("an interpreter without -c was given no limits and no error")
	}
}
