package container

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
)

// newOwner makes a Backend's owner id, which carries this process's owner tag, and its
// directory under stateDir, which holds the executions' socket directories.
func newOwner(stateDir string) (id, dir string, err error) {
	id = owner.Name(ownerPrefix)
	dir = filepath.Join(stateDir, "mcp-sandbox-"+id)
	return id, dir, os.Mkdir(dir, 0o700)
}

// sweep removes what dead owners left: their containers (found by label, wherever their
// directories went), their cgroups and their directories under stateDir. Only an owner id
// that owner.DeadNameThisBoot proves dead is swept (the runtime may be a remote daemon shared
// with servers on other machines, whose boot is not ours); a live owner's, another boot's,
// an untagged one (an older version's) and anything without the label are left alone.
func sweep(ctx context.Context, rt *Runtime, stateDir string) {
	// The label's value, by the runtime's own template for it.
	value := `{{index .Labels "` + OwnerLabel + `"}}`
	if rt.Kind == "docker" {
		value = `{{.Label "` + OwnerLabel + `"}}`
	}
	out, err := cli(ctx, rt.Path, "ps", "-a", "--filter", "label="+OwnerLabel, "--format", "{{.ID}} "+value)
	if err != nil {
		slog.Warn("container sweep: listing the containers failed; what dead owners left is left for the next start", "err", err)
		return
	}
	var ids []string
	owners := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if id, o, ok := strings.Cut(strings.TrimSpace(line), " "); ok && owner.DeadNameThisBoot(o) {
			ids, owners[o] = append(ids, id), true
		}
	}
	if len(ids) > 0 {
		if _, err := cli(ctx, rt.Path, append(rmArgs(rt), ids...)...); err != nil {
			slog.Warn("container sweep: removing dead owners' containers failed; they are left for the next start", "err", err)
			return
		}
		slog.Info("container sweep: removed the containers of owners that are gone", "owners", len(owners), "containers", len(ids))
	}
	cgroup.SweepParents(cgroup.Base, monitorGroup, func(name string) bool {
		i := strings.LastIndexByte(name, '-')
		return strings.HasPrefix(name, ownerPrefix+"-") && i > 0 && owner.DeadName(name[:i])
	})
	owner.Sweep(stateDir, "mcp-sandbox-"+ownerPrefix, os.RemoveAll)
}
