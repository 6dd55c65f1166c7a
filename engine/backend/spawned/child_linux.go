package spawned

import (
	"io"
	"syscall"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
)

// Child adapts a spawn.Proc to engine.Child. A backend fills Containment as it builds the
// child's containment, before Start.
type Child struct {
	*spawn.Proc
	Containment engine.Facts
	// WorkspacePath says where the host can read the workspace while the program lives;
	// nil means nowhere.
	WorkspacePath func() string
	// SignalFromStatus reports an exit status 128+N as signal N (bwrap's convention, for the
	// interpreter it waited for).
	SignalFromStatus bool
}

func (c *Child) Channel() io.ReadWriteCloser { return c.Conn() }
func (c *Child) Facts() engine.Facts         { return c.Containment }
func (c *Child) Close() engine.TreeUsage     { return engine.TreeUsage(c.Proc.Close()) }

func (c *Child) Workspace() string {
	if c.WorkspacePath == nil || c.Pid() == 0 {
		return ""
	}
	return c.WorkspacePath()
}

// CloseUnless closes c unless *started: deferred by a backend's Start, it closes a child that
// failed on its way to being started.
func (c *Child) CloseUnless(started *bool) {
	if !*started {
		c.Close()
	}
}

func (c *Child) Wait() engine.Exit {
	e := engine.Exit(c.Proc.Wait())
	if c.SignalFromStatus && e.Signal == "" && e.Code > 128 && e.Code < 128+65 {
		e.Signal, e.Code = syscall.Signal(e.Code-128).String(), -1
	}
	return e
}

// JoinCgroup creates the execution's cgroup under m, named name, with the terms' memory limit
// and room for the terms' processes plus extra (the backend's own init or wrapper), and has
// the helper join it first thing. A nil m is a no-op: the backend has no cgroup here.
func (c *Child) JoinCgroup(m *cgroup.Manager, name string, t engine.Terms, extra int, ls *launch.Spec) error {
	if m == nil {
		return nil
	}
	g, err := m.New(name, t.MemoryBytes, t.ProcessCount+extra)
	if err != nil {
		return failure.Wrap(failure.BackendUnavailable, err, "creating the execution's cgroup failed")
	}
	c.Group = g
	c.Containment.Cgroup = true
	ls.CgroupProcs = g.ProcsFiles()
	ls.CgroupClone = m.StartsInside()
	return nil
}
