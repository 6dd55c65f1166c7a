package assembly

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// TestIdentityAdviceAndNote: without root, doctor and a refusal say what a program runs as,
// what that leaves in reach, and how this host could do better: where user namespaces are
// blocked, the setting and the command that changes it; where only a subordinate range is
// missing, the command that adds one. As root there is nothing to say.
func TestIdentityAdviceAndNote(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"subuid", "subgid"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("someone:100000:65536\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := userns.Host{SubUID: filepath.Join(dir, "subuid"), SubGID: filepath.Join(dir, "subgid"),
		LookPath: func(n string) (string, error) { return "/usr/bin/" + n, nil }}
	blocked := "unprivileged user namespaces are switched off (kernel.unprivileged_userns_clone = 0); switch them on with `sudo sysctl -w kernel.unprivileged_userns_clone=1`"
	isolated := &engine.Description{Isolation: engine.LevelIsolated, Mechanisms: []string{"mount-namespace", "user-namespace"},
		Guarantees: engine.Guarantees{engine.DimIdentity: engine.Unavailable}}
	process := &engine.Description{Isolation: engine.LevelProcess, Mechanisms: []string{"rlimits", "subreaper"},
		Guarantees: engine.Guarantees{engine.DimIdentity: engine.Unavailable}}
	own := &engine.Description{Isolation: engine.LevelIsolated, Mechanisms: []string{"user-namespace", "subordinate-ids"},
		Guarantees: engine.Guarantees{engine.DimIdentity: engine.Enforced}}
	for _, tc := range []struct {
		name  string
		euid  int
		user  string
		nsWhy string
		d     *engine.Description
		want  []string // none: no note
	}{
		{"root", 0, "root", "", isolated, nil},
		{"windows: no uid", -1, "", "", &engine.Description{Isolation: engine.LevelProcess, Mechanisms: []string{"job-object"},
			Guarantees: engine.Guarantees{engine.DimIdentity: engine.Unavailable}},
			[]string{"your own Windows account", "Job Object", "no lesser identity", "runs without one"}},
		{"a subordinate uid of its own", 1000, "someone", "", own, nil},
		{"boundary, no range", 1000, "alice", "", isolated,
			[]string{"your own uid 1000", "user, mount, pid and network namespace", "the default accepts it", "usermod --add-subuids 165536-231071 --add-subgids 165536-231071 alice"}},
		{"no boundary: user namespaces blocked", 1000, "alice", blocked, process,
			[]string{"no kernel boundary", "the default refuses them", "allow_same_uid: true", "kernel.unprivileged_userns_clone = 0",
				"sudo sysctl -w kernel.unprivileged_userns_clone=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			note := identityNote(tc.euid, tc.d, identityAdvice(tc.euid, tc.user, tc.nsWhy, h))
			testkit.Mentions(t, "note", note, tc.want)
		})
	}
}
