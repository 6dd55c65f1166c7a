//go:build linux

package namespaces_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// These run only without root (CI runs them as a user it made, with and without a
// subordinate id range); as root no user namespace is made and the identity drop is root's.

func needNonRoot(t *testing.T) {
	t.Helper()
	gate.AppliesOnly(t, os.Geteuid() != 0, "the user-namespace path runs only without root (CI runs it as a user of its own)")
}

// defaultRunner is the embedded default's view: allow_same_uid false, no level asked for.
func defaultRunner(t *testing.T, opts namespaces.Options) *engine.Runner {
	t.Helper()
	ok, reason := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, reason)
	b, err := namespaces.New(context.Background(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.NewRunner(b, &engine.RunnerOptions{Artifacts: engine.ArtifactPolicy{Collect: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

const whoAmI = `import os
open("result.txt", "w").write("kept")
[os.getuid(), os.getgid(), open("/proc/self/uid_map").read().split(), sorted(n for n in os.listdir("/proc") if n.isdigit())]`

// TestOwnUIDBehindTheBoundary: a user without subordinate ids runs programs as its own uid
// (0 inside), and the default accepts that only because a user, mount, pid and network
// namespace of their own surround them: identity is said to be unavailable, everything
// else holds, and the level reached is isolated.
func TestOwnUIDBehindTheBoundary(t *testing.T) {
	needNonRoot(t)
	r := defaultRunner(t, namespaces.Options{Options: spawned.Options{Disable: []string{"subids"}}})
	res := r.Run(context.Background(), engine.Execution{Program: whoAmI, Terms: engine.Terms{Network: engine.NetworkNone}})
	ok(t, res)
	if res.Isolation != engine.LevelIsolated {
		t.Errorf("isolation %s, want isolated", res.Isolation)
	}
	for _, d := range engine.Dimensions {
		want := engine.Enforced
		if d == engine.DimIdentity {
			want = engine.Unavailable
		}
		if g := res.Guarantees.Get(d); g != want {
			t.Errorf("%s graded %s, want %s", d, g, want)
		}
	}
	if !strings.HasPrefix(string(res.Value), "[0,0,") {
		t.Errorf("value %s, want uid and gid 0 inside", res.Value)
	}
	// With the host's network there is no boundary, and the default refuses.
	net := defaultRunnerNet(t)
	res = net.Run(context.Background(), engine.Execution{Program: "42", Terms: engine.Terms{Network: engine.NetworkUnrestricted}})
	if res.Failure == nil || res.Failure.Kind != failure.IsolationUnavailable || !strings.Contains(res.Failure.Message, "identity") {
		t.Fatalf("the host's network and the host's uid: want an identity refusal, got %+v", res.Failure)
	}
}

func defaultRunnerNet(t *testing.T) *engine.Runner {
	t.Helper()
	b, err := namespaces.New(context.Background(), &namespaces.Options{Options: spawned.Options{Disable: []string{"subids"}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.NewRunner(b, &engine.RunnerOptions{AllowNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestSubordinateUID: a user with a subordinate range (and newuidmap) runs programs as the
// last id of it, mapped from 65534 inside, so identity is enforced without root; a file the
// program leaves readable comes back as an artifact, one it keeps to itself is named as not
// readable by the host.
func TestSubordinateUID(t *testing.T) {
	needNonRoot(t)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	sub, why := userns.Host{}.Subordinate(u.Username, os.Geteuid())
	gate.Require(t, "subids", sub != nil, why)
	r := defaultRunner(t, namespaces.Options{})
	res := r.Run(context.Background(), engine.Execution{Program: "import os\nopen('private', 'w').close()\nos.chmod('private', 0o600)\n" + whoAmI,
		Terms: engine.Terms{Network: engine.NetworkNone}})
	ok(t, res)
	var got []any
	if err := jsonUnmarshal(res.Value, &got); err != nil {
		t.Fatal(err)
	}
	if got[0] != float64(65534) || got[1] != float64(65534) {
		t.Errorf("uid, gid %v %v inside, want 65534", got[0], got[1])
	}
	if m := got[2].([]any); len(m) != 6 || m[3] != "65534" || m[4] != itoa(sub.UID) {
		t.Errorf("uid_map %v, want 65534 mapped to the subordinate uid %d", m, sub.UID)
	}
	for _, d := range engine.Dimensions {
		if g := res.Guarantees.Get(d); g != engine.Enforced {
			t.Errorf("%s graded %s, want enforced", d, g)
		}
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "result.txt" {
		t.Errorf("artifacts %+v, want result.txt", res.Artifacts)
	}
	if len(res.ArtifactsOmit) != 1 || !strings.Contains(res.ArtifactsOmit[0].Reason, "not readable by the host") {
		t.Errorf("artifacts_omitted %+v, want the private file named as unreadable", res.ArtifactsOmit)
	}
}

// TestBlockedUserNamespacesNameTheSetting: on a host whose settings forbid user namespaces
// (a fake proc tree here: this machine's cannot be changed under other users), the backend
// is unavailable and says which setting and the command that changes it.
func TestBlockedUserNamespacesNameTheSetting(t *testing.T) {
	needNonRoot(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "kernel", "unprivileged_userns_clone")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := namespaces.Options{Host: userns.Host{ProcSys: dir}}
	ok, why := namespaces.Available(&opts)
	_, err := namespaces.New(context.Background(), &opts)
	if ok || err == nil {
		t.Fatalf("available %v, New %v: want unavailable", ok, err)
	}
	for _, w := range []string{"kernel.unprivileged_userns_clone = 0", "sudo sysctl -w kernel.unprivileged_userns_clone=1"} {
		if !strings.Contains(why, w) || !strings.Contains(err.Error(), w) {
			t.Errorf("reason %q / error %q lacks %q", why, err, w)
		}
	}
}
