//go:build linux

package launch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch/seccomp"
	"golang.org/x/sys/unix"
)

// TestLandlockGrants: the helper's ruleset grants what go-landlock's RODirs, ROFiles, RWDirs
// and RWFiles granted before the helper made the system calls itself (read-write without
// REFER and IOCTL_DEV, a file only its file accesses), handles every file access of ABI 5
// and both scopes; a template's child's read-write grant is every handled access.
func TestLandlockGrants(t *testing.T) {
	const (
		x, rf, rd = unix.LANDLOCK_ACCESS_FS_EXECUTE, unix.LANDLOCK_ACCESS_FS_READ_FILE, unix.LANDLOCK_ACCESS_FS_READ_DIR
		wf, tr    = unix.LANDLOCK_ACCESS_FS_WRITE_FILE, unix.LANDLOCK_ACCESS_FS_TRUNCATE
		// go-landlock's accessFSWrite: write, truncate, make and remove, never refer or ioctl.
		write = wf | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
			unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
			unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM | tr
	)
	type record struct {
		dir, file uint64
		path      string
	}
	parse := func(b []byte) (handled, scoped uint64, rs []record) {
		handled, scoped, b = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), b[16:]
		for len(b) > 0 {
			n := 18 + int(binary.LittleEndian.Uint16(b[16:]))
			rs = append(rs, record{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), string(b[18:n])})
			b = b[n:]
		}
		return handled, scoped, rs
	}
	l := &Landlock{ReadOnly: []string{"/usr", ""}, ReadWrite: []string{"/work"}}
	handled, scoped, rs := parse(landlockRuleset(l, landlockRW))
	if handled != 1<<16-1 || scoped != unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET|unix.LANDLOCK_SCOPE_SIGNAL {
		t.Errorf("handled %#x, scoped %#x: want every file access of ABI 5 and both scopes", handled, scoped)
	}
	want := []record{{x | rf | rd, x | rf, "/usr"}, {x | rf | rd | write, x | rf | wf | tr, "/work"}}
	if len(rs) != len(want) || rs[0] != want[0] || rs[1] != want[1] {
		t.Errorf("the helper's records %+v, want %+v (the empty path left out)", rs, want)
	}
	if _, _, tpl := parse(LandlockRuleset(l)); len(tpl) != 2 || tpl[1].dir != landlockHandledFS || tpl[1].file != landlockFileFS {
		t.Errorf("a template child's read-write record %+v, want every handled access", tpl)
	}
}

// TestLandlockDowngrade: each ABI knows the file accesses go-landlock's table gives it
// (REFER from 2, TRUNCATE from 3, IOCTL_DEV from 5); best effort installs nothing where there is
// no Landlock, and otherwise a kernel short of the ruleset's accesses fails with why, before
// any system call.
func TestLandlockDowngrade(t *testing.T) {
	for abi, want := range []uint64{0, 1<<13 - 1, 1<<14 - 1, 1<<15 - 1, 1<<15 - 1, 1<<16 - 1, 1<<16 - 1, 1<<16 - 1} {
		if got := landlockKnownFS(abi); got != want {
			t.Errorf("ABI %d knows %#x, want %#x", abi, got, want)
		}
	}
	ruleset := landlockRuleset(&Landlock{ReadOnly: []string{"/usr"}}, landlockRW)
	if err := installLandlock(ruleset, 0, true); err != nil {
		t.Errorf("best effort without Landlock: %v", err)
	}
	err := installLandlock(ruleset, 3, false)
	if err == nil || !strings.Contains(err.Error(), "missing kernel Landlock support. Got Landlock ABI v3, wanted v5") {
		t.Errorf("ABI 3 without best effort: %v", err)
	}
	if err := installLandlock(ruleset[:10], 7, true); err == nil {
		t.Error("a ruleset shorter than its header was installed")
	}
}

// TestSockFilters: the helper takes only a whole sock_filter array within the kernel's bound,
// so a missing or cut filter fails the start instead of running a program unfiltered.
func TestSockFilters(t *testing.T) {
	for _, n := range []int{0, 7, 12, 8 * (unix.BPF_MAXINSNS + 1)} {
		if _, err := sockFilters(make([]byte, n)); err == nil {
			t.Errorf("a filter of %d bytes was taken", n)
		}
	}
	prog, err := sockFilters([]byte{1, 0, 2, 3, 4, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0xff, 0x7f})
	if err != nil || len(prog) != 2 || prog[0].Code != 1 || prog[0].Jt != 2 || prog[0].Jf != 3 || prog[1].Code != 6 {
		t.Errorf("sockFilters: %+v, %v", prog, err)
	}
}

// runHelper runs this test binary as the init helper (the package's initialiser answers
// Command) with spec, and returns its output and exit status.
func runHelper(t *testing.T, spec *Spec) (string, int) {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], Command)
	cmd.Env = []string{SpecEnv + "=" + string(js)}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("starting the helper: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestHelperLandlock: the helper's Landlock, made by its own system calls on the thread that
// execs, holds in the program it execs: read-only paths read but not written, read-write ones
// written, a file granted alone read, anything else refused, a missing path passed over; and
// with ABI 6 no signal leaves the domain.
func TestHelperLandlock(t *testing.T) {
	abi := LandlockABI()
	gate.Require(t, "landlock", abi >= 5, "the kernel's Landlock ABI is below 5 (the helper asks for ABI 5's accesses)")
	gate.Require(t, "sh", fileExists("/bin/sh"), "no /bin/sh")
	tmp := t.TempDir()
	ro, rw, out := filepath.Join(tmp, "ro"), filepath.Join(tmp, "rw"), filepath.Join(tmp, "out")
	for _, d := range []string{ro, rw, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("in "+filepath.Base(d)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	alone := filepath.Join(out, "alone")
	if err := os.WriteFile(alone, []byte("alone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `cat ro/f; echo x >ro/g || echo ro-write-refused; echo y >rw/g && echo rw-written; ` +
		`cat out/f || echo out-refused; cat out/alone; ls out >/dev/null || echo out-listing-refused; ` +
		`kill -0 $PPID && echo signal-sent || echo signal-refused`
	spec := &Spec{
		Python: "/bin/sh", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: tmp,
		Landlock: &Landlock{ReadOnly: []string{"/usr", "/lib", "/lib64", "/bin", "/etc", ro, alone, filepath.Join(tmp, "missing")}, ReadWrite: []string{rw, "/dev/null"}},
	}
	got, code := runHelper(t, spec)
	want := []string{"in ro", "ro-write-refused", "rw-written", "out-refused", "alone", "out-listing-refused", "signal-refused"}
	if abi < 6 {
		want[len(want)-1] = "signal-sent"
	}
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		if l != "" && !strings.Contains(l, "ermission denied") && !strings.Contains(l, "not permitted") {
			lines = append(lines, l)
		}
	}
	if code != 0 || strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("exit %d, output:\n%s\nwant the lines %q", code, got, want)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "g")); err != nil || string(b) != "y\n" {
		t.Errorf("rw/g: %q, %v", b, err)
	}
}

// TestHelperSeccompFilter: the helper installs the filter the host assembled (network none refuses
// an inet socket, EACCES, in the program it execs), hands it on unchanged for bwrap, and
// refuses to start a program when the host sent none.
func TestHelperSeccompFilter(t *testing.T) {
	gate.Require(t, "python", fileExists("/usr/bin/python3"), "no /usr/bin/python3")
	filter, err := seccomp.Filter(true, false)
	if err != nil {
		t.Fatal(err)
	}
	code := `import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    print("inet made")
except OSError as e:
    print("inet", e.errno)
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
print("unix made")`
	spec := &Spec{Python: "/usr/bin/python3", Argv: []string{"python3", "-I", "-c", code}, Dir: "/", Seccomp: true, DenyInet: true, Filter: filter}
	if got, exit := runHelper(t, spec); exit != 0 || got != "inet 13\nunix made\n" {
		t.Errorf("with the filter: exit %d, %q; want inet refused with EACCES (13), unix made", exit, got)
	}
	spec.Filter = nil
	if got, exit := runHelper(t, spec); exit != ExitSetupFailed || !strings.Contains(got, "mcp-sandbox-init: seccomp: the host sent no filter") {
		t.Errorf("without a filter: exit %d, %q; want the start refused", exit, got)
	}

	// Handed on: the "wrapper" (a script in bwrap's place) finds the filter on the descriptor
	// named after --seccomp, the one descriptor above 3 left open across exec.
	tmp := t.TempDir()
	wrapper, dump := filepath.Join(tmp, "wrapper"), filepath.Join(tmp, "dump")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\n[ \"$1\" = --seccomp ] && cat /dev/fd/$2 >"+dump+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec = &Spec{Python: wrapper, Argv: []string{"wrapper", "--", "python3"}, Dir: "/", Seccomp: true, SeccompHandOff: true, Filter: filter}
	if got, exit := runHelper(t, spec); exit != 0 {
		t.Fatalf("handing the filter on: exit %d, %q", exit, got)
	}
	if b, err := os.ReadFile(dump); err != nil || !bytes.Equal(b, filter) {
		t.Errorf("the wrapper read %d bytes (%v), want the filter's %d", len(b), err, len(filter))
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
