package spawned

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/identity"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/python"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// Base is what a local backend resolves once, in New: the sandbox identities and whether the
// host can drop to them, the interpreter those identities can execute and the directories it
// reads, the init helper, and a cgroup manager where one is usable.
type Base struct {
	IDs    *identity.Pool
	Drop   bool // the host is root and the identity drop is not disabled
	Python string
	RODirs []string
	// Interpreter is what the interpreter said of itself: its directories, and the bootstrap
	// it compiled (Argv hands it over instead of the text).
	Interpreter python.Info
	InitPath    string
	Cgroups     *cgroup.Manager // nil: no usable cgroup (not root, disabled, or none writable)
	// SignalRefused: the host drops to the sandbox identity but lacks CAP_KILL (a narrowed
	// bounding set), so every kill(2) it sends that identity's processes is refused; only a
	// v2 cgroup.kill, a root init of the host's own uid, or a kill as the uid itself reaches
	// them. A backend whose tree kill rests on kill(2) marks its children Unkillable.
	SignalRefused bool
}

// warnSignalRefused logs, once per process, that the tree kill is out of reach.
var warnSignalRefused sync.Once

// Resolve fills a Base. It starts no sandbox child; it asks the interpreter for its
// directories and has it compile the bootstrap, unless CacheDir remembers both. hostIDs, when
// set, are the host uid and gid the sandbox runs as without root (a subordinate id): the
// interpreter must be executable by them.
func Resolve(ctx context.Context, options *Options, hostIDs *[2]int) (*Base, error) {
	var o Options
	if options != nil {
		o = *options
	}
	if o.RunAs == "" {
		o.RunAs = "65534:65534"
	}
	ids, err := identity.Parse(o.RunAs)
	if err != nil {
		return nil, err
	}
	b := &Base{IDs: ids, InitPath: o.InitPath, Drop: os.Geteuid() == 0 && !o.Disabled("identity")}
	if b.InitPath == "" {
		if b.InitPath, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	probe, release, _ := ids.Lease(context.Background(), false)
	release()
	uid, gid := os.Geteuid(), os.Getegid()
	switch {
	case b.Drop:
		uid, gid = probe.UID, probe.GID
	case hostIDs != nil:
		uid, gid = hostIDs[0], hostIDs[1]
	}
	if b.Python, err = python.Find(o.Python, uid, gid, exec.LookPath); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if b.Interpreter, err = python.InspectCached(ctx, b.Python, engine.BootstrapSource, o.CacheDir); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	b.RODirs = append(slices.Clip(b.Interpreter.Dirs), filepath.Dir(b.Python))
	if os.Geteuid() == 0 && !o.Disabled("cgroup") {
		b.Cgroups, _ = cgroup.Detect(cgroup.Base)
	}
	if b.Drop && !launch.HasCapability(unix.CAP_KILL) && (b.Cgroups == nil || !b.Cgroups.KillsWithoutSignals()) {
		b.SignalRefused = true
		warnSignalRefused.Do(func() {
			slog.Warn("the server lacks CAP_KILL: it cannot signal the sandbox identity's processes, so the process and bwrap " +
				"backends cannot kill a program's tree here (no cgroup v2 cgroup.kill either); their process_tree guarantee is " +
				"unavailable and a program that does not end on its own outlives its execution. Add CAP_KILL to the " +
				"capability bounding set (deploy/systemd/mcp-sandbox.service has it)")
		})
	}
	if b.Cgroups != nil {
		// The groups a killed server left (named by owner.Name, its owner provably dead).
		if n := b.Cgroups.Sweep(owner.DeadName); n > 0 {
			slog.Info("swept cgroups a stopped server left", "count", n)
		}
	}
	return b, nil
}

// Argv is the interpreter's argv (after the interpreter itself) for a launch's: the bootstrap
// compiled once by this interpreter when it could be, so no child compiles it again.
func (b *Base) Argv(argv []string) []string { return b.Interpreter.Argv(argv, engine.BootstrapSource) }

// Lease leases an identity for one execution and fills c's identity facts: the host's uid,
// and, when the host drops to a sandbox identity, that uid, whether it is exclusive, and
// the kill by uid an exclusive one allows. The lease is released when c closes. ahead is
// LaunchSpec.Ahead (identity.Pool.Lease).
func (b *Base) Lease(ctx context.Context, c *Child, ahead bool) (identity.Identity, error) {
	id, release, err := b.IDs.Lease(ctx, ahead)
	if err != nil {
		return id, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if c.Proc == nil {
		c.Proc = &spawn.Proc{}
	}
	c.Cleanup = append(c.Cleanup, release)
	c.Containment.HostUID, c.Containment.RunAsUID = os.Geteuid(), os.Geteuid()
	if b.Drop {
		c.Containment.RunAsUID, c.Containment.ExclusiveUID = id.UID, id.Exclusive
		if id.Exclusive {
			c.KillUID = id.UID
		}
	}
	return id, nil
}
