//go:build linux

package namespaces_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestUIDZeroHoldsNoCapabilities: a program left at uid 0 inside the sandbox (no identity
// drop, as for an unprivileged host's user namespace) holds no capability, cannot get one
// back, and so cannot remount its read-only root or chown what is not its own.
func TestUIDZeroHoldsNoCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		gate.AppliesOnly(t, false, "the identity drop can be switched off only when the host is root")
	}
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{Options: spawned.Options{Disable: []string{"identity"}}},
		engine.RunnerOptions{AllowSameUID: true})
	res := r.Run(context.Background(), engine.Execution{Program: `import os, subprocess
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
open("mine", "w").close()
try:
    os.chown("mine", 12345, 12345)
    chown = "allowed"
except PermissionError:
    chown = "refused"
{"uid": str(os.getuid()), "eff": status["CapEff"].strip(), "prm": status["CapPrm"].strip(),
 "bnd": status["CapBnd"].strip(), "amb": status["CapAmb"].strip(), "chown": chown}`})
	if res.Failure != nil {
		t.Fatalf("%s: %s\n%s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback)
	}
	got := valueMap(t, res)
	for _, k := range []string{"eff", "prm", "bnd", "amb"} {
		if strings.Trim(got[k], "0") != "" {
			t.Errorf("Cap%s = %s, want none", k, got[k])
		}
	}
	if got["uid"] != "0" || got["chown"] != "refused" {
		t.Errorf("uid %s, chown %s: want uid 0 refused a chown", got["uid"], got["chown"])
	}
}
