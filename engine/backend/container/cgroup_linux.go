//go:build linux

package container

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"golang.org/x/sys/unix"
)

// cgroupRoot is where cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupBase is the directory, in every hierarchy, under which each execution's cgroup is
// made; it is shared with the other local backends (internal/cgroup) and never removed.
const cgroupBase = "mcp-sandbox"

// conmonGroup is where podman (cgroupfs) puts its monitor under the parent it is given.
const conmonGroup = "conmon"

// layout is the host's cgroup layout.
type layout struct {
	v2 bool // cgroupRoot is cgroup2
	// hybrid: v1 controllers, and a cgroup2 mount that holds controllers of its own (crun
	// refuses this layout).
	hybrid bool
	detail string
}

// HybridCgroups reports whether this host's cgroup layout is hybrid in the way crun refuses.
func HybridCgroups() bool { return detectLayout(cgroupRoot).hybrid }

func isCgroup2(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

func detectLayout(root string) layout {
	if isCgroup2(root) {
		return layout{v2: true, detail: "cgroup v2"}
	}
	unified := filepath.Join(root, "unified")
	if !isCgroup2(unified) {
		return layout{detail: "cgroup v1"}
	}
	ctrl, _ := os.ReadFile(filepath.Join(unified, "cgroup.controllers"))
	if c := strings.Join(strings.Fields(string(ctrl)), " "); c != "" {
		return layout{hybrid: true, detail: fmt.Sprintf("cgroup v1 controllers, and a cgroup v2 mount at %s holding %s", unified, c)}
	}
	return layout{detail: "cgroup v1, and an empty cgroup v2 mount at " + unified}
}

// hierarchy is one mounted cgroup hierarchy.
type hierarchy struct {
	dir         string
	controllers []string // v1: the controllers it carries; v2: nil
}

// hierarchies lists the cgroup hierarchies mounted under root.
func hierarchies(root string) []hierarchy {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []hierarchy
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		mnt := fields[4]
		if mnt != root && !strings.HasPrefix(mnt, root+"/") {
			continue
		}
		switch tail[0] {
		case "cgroup2":
			out = append(out, hierarchy{dir: mnt})
		case "cgroup":
			var ctrl []string
			for _, o := range strings.Split(tail[2], ",") {
				switch o {
				case "rw", "ro", "relatime", "noexec", "nosuid", "nodev":
				default:
					ctrl = append(ctrl, o)
				}
			}
			out = append(out, hierarchy{dir: mnt, controllers: ctrl})
		}
	}
	return out
}

func (h hierarchy) has(controller string) bool {
	for _, c := range h.controllers {
		if c == controller {
			return true
		}
	}
	return false
}

// execCgroup is one execution's cgroup: the parent the runtime nests the container (and
// podman's monitor) under. It carries the memory limit, and its counters outlive the
// container's own cgroup.
type execCgroup struct {
	// Parent is the --cgroup-parent: "/mcp-sandbox/<name>".
	Parent string
	v2     bool
	mem    string // the directory holding the memory limit and the OOM count
	cpu    string // the directory holding the CPU usage
	procs  string // a directory whose subdirectories list the container's processes

	mu sync.Mutex
	// seenOOM is the most OOM kills the container's own cgroups were seen to count: on v1 the
	// count stays where the victim was, and the runtime removes that cgroup with the container.
	seenOOM int64
}

// newExecCgroup creates the cgroup name with memoryBytes as its memory limit (swap included).
func newExecCgroup(name string, memoryBytes int64) (*execCgroup, error) {
	g := &execCgroup{Parent: "/" + cgroupBase + "/" + name}
	limit := strconv.FormatInt(memoryBytes, 10)
	if isCgroup2(cgroupRoot) {
		g.v2 = true
		base := filepath.Join(cgroupRoot, cgroupBase)
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		enable(cgroupRoot)
		enable(base)
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		g.mem, g.cpu, g.procs = dir, dir, dir
		enable(dir)
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(limit), 0); err != nil {
			g.remove()
			return nil, fmt.Errorf("setting memory.max: %w", err)
		}
		_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
		return g, nil
	}
	for _, h := range hierarchies(cgroupRoot) {
		if h.has("memory") {
			g.mem = filepath.Join(h.dir, cgroupBase, name)
		}
		if h.has("cpuacct") {
			g.cpu = filepath.Join(h.dir, cgroupBase, name)
		}
	}
	if g.mem == "" || g.cpu == "" {
		return nil, errors.New("no cgroup v1 memory and cpuacct hierarchies")
	}
	g.procs = g.mem
	for _, d := range []string{g.mem, g.cpu} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			g.remove()
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(g.mem, "memory.limit_in_bytes"), []byte(limit), 0); err != nil {
		g.remove()
		return nil, fmt.Errorf("setting memory.limit_in_bytes: %w", err)
	}
	// Without swap accounting the file is absent, and swap is the host's to give.
	_ = os.WriteFile(filepath.Join(g.mem, "memory.memsw.limit_in_bytes"), []byte(limit), 0)
	return g, nil
}

// enable delegates the controllers the execution's cgroup uses to dir's children, one at a
// time, so that one the kernel lacks does not keep the others off.
func enable(dir string) {
	for _, c := range []string{"+memory", "+pids", "+cpu"} {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(c), 0)
	}
}

// containerPIDs lists the processes of the container: those in the parent's subgroups other
// than the runtime monitor's.
func (g *execCgroup) containerPIDs() []int {
	entries, _ := os.ReadDir(g.procs)
	var pids []int
	for _, e := range entries {
		if e.IsDir() && e.Name() != conmonGroup {
			pids = append(pids, cgroup.ReadPIDs(filepath.Join(g.procs, e.Name(), "cgroup.procs"))...)
		}
	}
	return pids
}

// end sends SIGKILL to every process of the container once, then lifts the memory limit: a
// process exiting in a memory cgroup that is full of what the container wrote to its tmpfs
// mounts (which only the container's end frees) can wait on that memory indefinitely. Every
// process is killed first, so none can use what the lifted limit allows.
func (g *execCgroup) end() {
	g.noteOOM()
	for _, p := range g.containerPIDs() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if g.v2 {
		_ = os.WriteFile(filepath.Join(g.mem, "memory.max"), []byte("max"), 0)
		return
	}
	// The limit with swap must stay above the limit without: raise it first.
	_ = os.WriteFile(filepath.Join(g.mem, "memory.memsw.limit_in_bytes"), []byte("-1"), 0)
	_ = os.WriteFile(filepath.Join(g.mem, "memory.limit_in_bytes"), []byte("-1"), 0)
}

// kill kills every process of the container, and returns once none is left (or after a bound).
func (g *execCgroup) kill() { cgroup.KillAll(g.containerPIDs, 100) }

// cpuSeconds is the CPU time the container used: the parent's usage, which keeps what
// removed subgroups used, less the monitor's.
func (g *execCgroup) cpuSeconds() float64 {
	if g.v2 {
		usec := func(dir string) int64 { return cgroup.Field(filepath.Join(dir, "cpu.stat"), "usage_usec") }
		return float64(usec(g.cpu)-usec(filepath.Join(g.cpu, conmonGroup))) / 1e6
	}
	ns := func(dir string) int64 {
		b, _ := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	return float64(ns(g.cpu)-ns(filepath.Join(g.cpu, conmonGroup))) / 1e9
}

// oomKills counts the processes the memory limit killed: on v2 the parent's count, which
// includes its subgroups'; on v1 what noteOOM saw in the parent and its subgroups.
func (g *execCgroup) oomKills() int64 {
	g.noteOOM()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seenOOM
}

// noteOOM records the OOM kills counted so far. Call it while the container's cgroups still
// exist: when the channel ends, when its interpreter exits, and before it is killed.
//
// Only the parent has a limit, so every OOM kill below it is that limit's, the runtime
// monitor's included (it is charged to the same limit, and a program that filled the memory
// with files leaves the monitor, or the cleanup it starts, none). On v2 the parent's
// memory.events counts its subgroups' kills; on v1 each kill is counted only in the victim's
// own cgroup (memory.oom_control's oom_kill), so the parent and every subgroup are summed.
func (g *execCgroup) noteOOM() {
	var n int64
	if g.v2 {
		n = cgroup.Field(filepath.Join(g.mem, "memory.events"), "oom_kill")
	} else {
		n = oomKillsV1(g.mem)
	}
	g.mu.Lock()
	g.seenOOM = max(g.seenOOM, n)
	g.mu.Unlock()
}

// oomKillsV1 sums memory.oom_control's oom_kill over dir and its subgroups, to a small depth
// (the runtime nests the container and its monitor one level down).
func oomKillsV1(dir string) int64 {
	var walk func(dir string, depth int) int64
	walk = func(dir string, depth int) int64 {
		n := cgroup.Field(filepath.Join(dir, "memory.oom_control"), "oom_kill")
		if depth == 0 {
			return n
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				n += walk(filepath.Join(dir, e.Name()), depth-1)
			}
		}
		return n
	}
	return walk(dir, 3)
}

// remove kills what is left and removes the cgroup from every hierarchy (the runtime makes
// the parent in each one it uses). It is idempotent.
func (g *execCgroup) remove() error {
	g.kill()
	var errs []error
	for _, h := range hierarchies(cgroupRoot) {
		if err := removeTree(filepath.Join(h.dir, strings.TrimPrefix(g.Parent, "/"))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeBound bounds the wait for a cgroup's last process to leave: the runtime's monitor
// lingers while it runs the container's cleanup, which takes a moment on a busy host.
const removeBound = 10 * time.Second

// removeTree removes a cgroup directory and its subgroups, deepest first, retrying while
// their last processes exit. A cgroup directory holds no files that need removing.
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(removeBound)
	for i := 1; ; i++ {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("removing cgroup %s: %w", dir, err)
		}
		time.Sleep(time.Duration(min(i, 20)) * time.Millisecond)
	}
}

// removeOwnerCgroups removes every execution cgroup whose name dead accepts, in every
// hierarchy: the sweep of dead owners' leftovers.
func removeOwnerCgroups(dead func(name string) bool) {
	for _, h := range hierarchies(cgroupRoot) {
		base := filepath.Join(h.dir, cgroupBase)
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				g := &execCgroup{procs: filepath.Join(base, e.Name())}
				g.kill()
				_ = removeTree(g.procs)
			}
		}
	}
}
