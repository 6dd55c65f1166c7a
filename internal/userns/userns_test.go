package userns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// fakeHost is a host whose settings live in a directory of the test's: sysctls as files
// under proc/sys, an AppArmor label, and subordinate id files.
func fakeHost(t *testing.T, sysctls map[string]string, label string, subuid, subgid string) Host {
	t.Helper()
	dir := t.TempDir()
	h := Host{ProcSys: filepath.Join(dir, "sys"), AppArmorLabel: filepath.Join(dir, "label"),
		SubUID: filepath.Join(dir, "subuid"), SubGID: filepath.Join(dir, "subgid"),
		LookPath: func(name string) (string, error) { return "/usr/bin/" + name, nil }}
	write := func(p, content string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, v := range sysctls {
		write(filepath.Join(h.ProcSys, strings.ReplaceAll(name, ".", "/")), v+"\n")
	}
	write(h.AppArmorLabel, label)
	write(h.SubUID, subuid)
	write(h.SubGID, subgid)
	return h
}

// TestBlockedNamesTheSettingAndTheCommand: each setting that keeps an unprivileged user from
// making a user namespace is named exactly, with the command that changes it.
func TestBlockedNamesTheSettingAndTheCommand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sysctls map[string]string
		label   string
		want    []string // none: Blocked says nothing
	}{
		{"allowed", map[string]string{"kernel.unprivileged_userns_clone": "1", "user.max_user_namespaces": "15000"}, "unconfined", nil},
		{"no such settings (a kernel without the Debian patch)", nil, "", nil},
		{"Debian's switch", map[string]string{"kernel.unprivileged_userns_clone": "0"}, "unconfined",
			[]string{"kernel.unprivileged_userns_clone = 0", "sudo sysctl -w kernel.unprivileged_userns_clone=1", "/etc/sysctl.d/"}},
		{"no namespaces at all", map[string]string{"user.max_user_namespaces": "0"}, "unconfined",
			[]string{"user.max_user_namespaces = 0", "sudo sysctl -w user.max_user_namespaces=15000"}},
		{"Ubuntu's AppArmor restriction", map[string]string{"kernel.apparmor_restrict_unprivileged_userns": "1"}, "unconfined\n",
			[]string{"kernel.apparmor_restrict_unprivileged_userns = 1", "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
				"profile mcp-sandbox /opt/bin/mcp-sandbox", "userns,", "apparmor_parser -r"}},
		{"the restriction, under a profile of this program's own", map[string]string{"kernel.apparmor_restrict_unprivileged_userns": "1"},
			"mcp-sandbox (unconfined)\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fakeHost(t, tc.sysctls, tc.label, "", "").Blocked("/opt/bin/mcp-sandbox")
			testkit.Mentions(t, "Blocked =", got, tc.want)
		})
	}
	h := fakeHost(t, map[string]string{"kernel.apparmor_restrict_unprivileged_userns": "1"}, "unconfined", "", "")
	if got := h.KernelBlocked(); got != "" {
		t.Errorf("KernelBlocked counts AppArmor's restriction, which bwrap's own profile may lift: %q", got)
	}
}

func TestSubordinate(t *testing.T) {
	const ranges = "other:100000:65536\nalice:165536:65536\n1002:231072:1000\n"
	h := fakeHost(t, nil, "", ranges, ranges)
	s, why := h.Subordinate("alice", 1001)
	if s == nil || s.UID != 165536+65535 || s.GID != 165536+65535 || s.NewUIDMap != "/usr/bin/newuidmap" {
		t.Fatalf("alice: %+v (%s), want the last id of her range", s, why)
	}
	if s.UIDCount != 65536 || s.GIDCount != 65536 {
		t.Fatalf("alice: ranges of %d and %d ids, want 65536", s.UIDCount, s.GIDCount)
	}
	if s, _ := h.Subordinate("bob", 1002); s == nil || s.UID != 231072+999 || s.UIDCount != 1000 {
		t.Fatalf("an entry by uid: %+v", s)
	}
	s, why = h.Subordinate("carol", 1003)
	if s != nil || !strings.Contains(why, "no subordinate uid range for carol") || !strings.Contains(why, "usermod --add-subuids") {
		t.Fatalf("carol: %+v, %q: want none, with the command that adds a range", s, why)
	}
	h.LookPath = func(name string) (string, error) { return "", errors.New("not found") }
	if s, why := h.Subordinate("alice", 1001); s != nil || !strings.Contains(why, "apt-get install uidmap") {
		t.Fatalf("without newuidmap: %+v, %q", s, why)
	}
}

// TestRangeAdviceIsSafeToPaste (issue 37): the command that gives a user a subordinate range
// names a range no entry of either file holds, whatever order the entries are in, and asks
// for uidmap only when newuidmap or newgidmap is missing. doctor and every refusal quote it.
func TestRangeAdviceIsSafeToPaste(t *testing.T) {
	found := func(name string) (string, error) { return "/usr/bin/" + name, nil }
	for _, tc := range []struct {
		name           string
		subuid, subgid string
		lookPath       func(string) (string, error)
		want           string // the range offered
		uidmap         bool   // the install is asked for
	}{
		{"empty files", "", "", found, "100000-165535", false},
		{"the usual first range taken", "someone:100000:65536\n", "someone:100000:65536\n", found, "165536-231071", false},
		{"taken in the gid file only", "", "someone:100000:65536\n", found, "165536-231071", false},
		{"out of order, gaps too small", "c:250000:65536\na:100000:65536\nb:200000:1000\n", "", found, "315536-381071", false},
		{"a gap that fits exactly", "c:300000:65536\na:100000:65536\nb:231072:1000\n", "", found, "165536-231071", false},
		{"a gap that fits", "a:100000:65536\nb:300000:10\n", "", found, "165536-231071", false},
		{"by uid and a comment-like line", "#x\n1000:100000:70000\n", "", found, "170000-235535", false},
		{"newgidmap missing", "", "", func(name string) (string, error) {
			if name == "newgidmap" {
				return "", errors.New("not found")
			}
			return "/usr/bin/" + name, nil
		}, "100000-165535", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fakeHost(t, nil, "", tc.subuid, tc.subgid)
			h.LookPath = tc.lookPath
			_, why := h.Subordinate("carol", 1003)
			want := "--add-subuids " + tc.want + " --add-subgids " + tc.want + " carol"
			if !strings.Contains(why, want) {
				t.Errorf("advice %q, want it to offer %s", why, want)
			}
			if got := strings.Contains(why, "apt-get install uidmap"); got != tc.uidmap {
				t.Errorf("advice %q asks for uidmap: %v, want %v", why, got, tc.uidmap)
			}
		})
	}
	full := fakeHost(t, nil, "", fmt.Sprintf("all:%d:%d\n", rangeMin, idMax-rangeMin), "")
	if _, why := full.Subordinate("carol", 1003); strings.Contains(why, "--add-subuids 4") || !strings.Contains(why, "FIRST-LAST") {
		t.Errorf("with no room left the advice is %q, want it to name no range", why)
	}
}
