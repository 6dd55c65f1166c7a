//go:build !linux

package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// newOwner makes a Backend's owner id and its directory under stateDir (which holds its
// seccomp profiles). internal/owner's proofs of a dead owner are Linux's (a pid, its start
// time and namespace, a lock): here an id is random, and no owner is ever proved dead.
func newOwner(stateDir string) (id, dir string, err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	id = ownerPrefix + "-" + hex.EncodeToString(rnd[:])
	dir = filepath.Join(stateDir, "mcp-sandbox-"+id)
	return id, dir, os.Mkdir(dir, 0o700)
}

// sweep removes the labelled containers that ended a while ago (more than a minute, as the
// engine says: a live server removes its own at once, after reading how it ended), whoever
// made them; a server killed outright leaves those. A running container of a dead server is
// left alone: no owner can be proved dead here. Nothing without the label is touched.
func sweep(ctx context.Context, rt *Runtime, _ string) {
	out, err := cli(ctx, rt.Path, "ps", "-a", "--filter", "label="+OwnerLabel, "--filter", "status=exited", "--format", "{{.ID}}|{{.Status}}")
	if err != nil {
		slog.Warn("container sweep: listing the containers failed; what ended ones left is left for the next start", "err", err)
		return
	}
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		f := fields(strings.TrimSpace(line), 2)
		if f[0] != "" && strings.HasPrefix(f[1], "Exited") && !strings.Contains(f[1], "second") {
			ids = append(ids, f[0])
		}
	}
	if len(ids) == 0 {
		return
	}
	if _, err := cli(ctx, rt.Path, append(rmArgs(rt), ids...)...); err != nil {
		slog.Warn("container sweep: removing ended containers failed; they are left for the next start", "err", err)
	}
}
