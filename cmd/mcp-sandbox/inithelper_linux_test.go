package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestEmbeddedInitHelper: the binary as make build and the tests build it embeds the init
// helper alone, writes it to a file of this uid's that other uids may exec, says so in
// doctor, and execs it for the children: a namespaces child's pid 1 (its reaper) is that
// file, not the whole binary.
func TestEmbeddedInitHelper(t *testing.T) {
	out, errOut, _ := runCLI(t, "", "doctor", "--json")
	var doc struct {
		Helper struct {
			Path     string `json:"path"`
			Embedded bool   `json:"embedded"`
			Size     int64  `json:"size"`
			Why      string `json:"why"`
		} `json:"init_helper"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, out, errOut)
	}
	h := doc.Helper
	if !h.Embedded {
		t.Fatalf("the built binary embeds no init helper: %s", h.Why)
	}
	if want := filepath.Join(os.TempDir(), "mcp-sandbox-init-"+strconv.Itoa(os.Geteuid())); filepath.Dir(h.Path) != want {
		t.Fatalf("the helper is at %s, want it in %s", h.Path, want)
	}
	info, err := os.Stat(h.Path)
	if err != nil || info.Mode().Perm() != 0o555 || info.Size() != h.Size {
		t.Fatalf("the helper file: %v (mode %v, %d bytes), want 0555 and %d bytes", err, info.Mode(), info.Size(), h.Size)
	}
	if whole, _ := os.Stat(testkit.Binary(t)); info.Size()*4 > whole.Size() {
		t.Fatalf("the helper has %d bytes beside the binary's %d: it is not the helper alone", info.Size(), whole.Size())
	}
	if text, _, _ := runCLI(t, "", "doctor"); !strings.Contains(text, "init helper: "+h.Path+" (the helper alone") {
		t.Fatalf("doctor does not name the helper:\n%s", text)
	}

	requireNamespaces(t)
	out, errOut, code := runCLI(t, `print(open("/proc/1/comm").read().strip())`, "run", "-")
	r := decodeResult(t, out)
	if code != 0 || r.Failure != nil {
		t.Fatalf("exit %d, failure %+v\nstderr: %s", code, r.Failure, errOut)
	}
	// comm is the file's name cut to 15 bytes.
	if want := filepath.Base(h.Path)[:15]; strings.TrimSpace(r.Stdout) != want {
		t.Fatalf("the child's pid 1 is %q, want the helper alone (%q)", r.Stdout, want)
	}
}
