package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 28, must show 4: an HTTP upstream whose URL the server-wide egress rules refuse is
// reported by check, naming its key, and no command connects to it: the config is refused
// before any upstream is opened, so the test's listener has nothing in its backlog.
func TestCheckEgressRefusesUpstream(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
profiles: {default: {}}
egress: {allow: ["*.example.com", "127.0.0.1:%d"], deny: ["http://127.0.0.1:%d/admin"]}
upstreams:
  crm: {url: "http://127.0.0.1:%d/admin/mcp"}
  far: {a2a: {url: "https://agents.example.org/inv"}}
  fine: {url: "https://crm.example.com/mcp"}
tenants: {local: {upstreams: [crm, far, fine], agents: {default: {code_execution: {}}}}}
`, port, port, port)), 0o644)
	_, errOut, code := runCLI(t, "", "check", "--config", cfg)
	if code != 2 {
		t.Fatalf("check: exit %d, stderr %q; want 2", code, errOut)
	}
	for _, want := range []string{"upstreams.crm.url", "denied", "upstreams.far.a2a.url", "not_allowed"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("check's stderr %q does not name %q", errOut, want)
		}
	}
	if strings.Contains(errOut, "upstreams.fine") {
		t.Errorf("check refused the allowed upstream: %q", errOut)
	}
	if _, errOut, code := runCLI(t, "1", "run", "--config", cfg, "-"); code != 2 {
		t.Errorf("run with the refused upstream: exit %d, stderr %q; want 2", code, errOut)
	}
	// Both commands have exited: a connection either made would wait in the backlog now.
	l.(*net.TCPListener).SetDeadline(time.Now())
	c, err := l.Accept()
	if err == nil {
		c.Close()
		t.Fatal("the refused upstream was connected to")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("accept: %v", err)
	}
}

// doctor names the stdio upstreams that run unconfined, and those a profile contains.
func TestDoctorNamesUnconfinedUpstreams(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`
data_dir: "-"
profiles: {default: {backend: process, allow_same_uid: true}, boxed: {backend: namespaces, isolation: isolated}}
upstreams:
  loose: {command: ["/bin/true"]}
  boxed: {command: ["/bin/true"], sandbox: boxed}
  web: {url: "https://x.example/mcp"}
tenants: {local: {upstreams: [loose, boxed, web], agents: {default: {}}}}
`), 0o644)
	out, errOut, _ := runCLI(t, "", "doctor", "--config", cfg)
	if !strings.Contains(out, "loose") || !strings.Contains(out, "UNCONFINED") || !strings.Contains(out, "contained by profile boxed") {
		t.Errorf("doctor's stdout %q (stderr %q) does not name the unconfined and the contained upstream", out, errOut)
	}
	if strings.Contains(out, "  web ") {
		t.Errorf("doctor lists an HTTP upstream as a stdio server: %q", out)
	}
}
