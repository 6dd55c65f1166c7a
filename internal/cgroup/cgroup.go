//go:build linux

package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Root is where cgroup hierarchies are mounted.
const Root = "/sys/fs/cgroup"

// Base is the directory, in every hierarchy, under which each execution's cgroup is made, by
// every local backend (Detect's name for the process, namespaces and bwrap backends; NewParent's
// base for the container backend). It is never removed.
const Base = "mcp-sandbox"

// Manager creates groups under one parent directory per hierarchy.
type Manager struct {
	v2      bool
	parents []string // v2: one; v1: memory, pids

	mu   sync.Mutex
	keep int      // how many emptied groups Remove keeps for New (Keep)
	kept []*Group // emptied groups, fresh values each, for the next New
}

// Detect finds a writable cgroup hierarchy with memory and pids control and prepares the
// parent named name under it. The error says why none is usable.
func Detect(name string) (*Manager, error) {
	if b, err := os.ReadFile(filepath.Join(Root, "cgroup.controllers")); err == nil {
		ctrl := strings.Fields(string(b))
		if !contains(ctrl, "memory") || !contains(ctrl, "pids") {
			return nil, fmt.Errorf("cgroup v2 at %s lacks the memory or pids controller", Root)
		}
		parent := filepath.Join(Root, name)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2 is not writable: %w", err)
		}
		_ = os.WriteFile(filepath.Join(Root, "cgroup.subtree_control"), []byte("+memory +pids"), 0)
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: cannot delegate memory and pids to %s: %w", parent, err)
		}
		return &Manager{v2: true, parents: []string{parent}}, nil
	}
	var parents []string
	for _, c := range []string{"memory", "pids"} {
		dir := filepath.Join(Root, c)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("no cgroup v1 %s hierarchy at %s", c, dir)
		}
		parent := filepath.Join(dir, name)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s is not writable: %w", c, err)
		}
		parents = append(parents, parent)
	}
	return &Manager{parents: parents}, nil
}

// Sweep removes every group under the manager's parents whose name dead reports true (a group
// a dead server left), killing what is still in it first, and returns how many it removed.
func (m *Manager) Sweep(dead func(name string) bool) int {
	n := 0
	for _, p := range m.parents {
		entries, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !dead(e.Name()) {
				continue
			}
			g := &Group{v2: m.v2, dirs: []string{filepath.Join(p, e.Name())}}
			if g.Remove() == nil {
				n++
			}
		}
	}
	return n
}

// Version is "v2" or "v1".
func (m *Manager) Version() string {
	if m.v2 {
		return "v2"
	}
	return "v1"
}

// KillsWithoutSignals reports whether a group's kill needs no signal permission: v2's
// cgroup.kill (Linux 5.14) kills every member whatever its uid. Elsewhere Signal sends
// SIGKILL to each member with kill(2), which a root host without CAP_KILL cannot do to a
// process of another uid.
func (m *Manager) KillsWithoutSignals() bool {
	if !m.v2 {
		return false
	}
	_, err := os.Stat(filepath.Join(m.parents[0], "cgroup.kill"))
	return err == nil
}

// StartsInside reports whether a process can be started inside a group rather than joined
// to it (clone3's CLONE_INTO_CGROUP, Linux 5.7, v2 only; Group.ProcsFiles then names the one
// directory). cgroup.kill (Linux 5.14) witnesses a kernel that new.
func (m *Manager) StartsInside() bool { return m.KillsWithoutSignals() }

// Group is one execution's cgroup.
type Group struct {
	v2   bool
	dirs []string // v2: one; v1: memory, pids
	// keeper is the Manager whose Keep lets Remove hand the emptied directories on; limits
	// the memory and pids limits last written; base the counters when this Group took over
	// directories another had used (Events counts from there).
	keeper *Manager
	limits [2]int64
	base   Events

	mu      sync.Mutex
	removed bool
}

// Keep makes Remove keep up to n emptied groups, and New hand them out again before it makes
// one: an execution's group costs a mkdir and an rmdir in each hierarchy otherwise, on v1
// the largest part of a forked child's teardown in the server (docs/design.md §19.3). A kept
// group is empty (Remove keeps only a group its kill emptied) and its counters are counted
// from where the last execution left them. Close removes what is kept.
func (m *Manager) Keep(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keep = n
}

// Close removes the groups Keep kept; the Manager still makes new ones.
func (m *Manager) Close() error {
	m.mu.Lock()
	kept := m.kept
	m.kept, m.keep = nil, 0
	m.mu.Unlock()
	var errs []error
	for _, g := range kept {
		errs = append(errs, g.Remove())
	}
	return errors.Join(errs...)
}

// take keeps g's directories for New, as a new Group counted from the counters now (read
// only once it is known to keep them), when the Manager keeps fewer than Keep asks.
func (m *Manager) take(g *Group, now func() Events) bool {
	m.mu.Lock()
	full := len(m.kept) >= m.keep
	m.mu.Unlock()
	if full {
		return false
	}
	kept := &Group{v2: g.v2, dirs: g.dirs, keeper: m, limits: g.limits, base: now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.kept) >= m.keep {
		return false
	}
	m.kept = append(m.kept, kept)
	return true
}

// New creates the group id with the given limits, or hands out a group Remove kept (Keep),
// under the name it was made with.
func (m *Manager) New(id string, memoryBytes int64, pids int) (*Group, error) {
	m.mu.Lock()
	var g *Group
	if n := len(m.kept); n > 0 {
		g, m.kept = m.kept[n-1], m.kept[:n-1]
	}
	m.mu.Unlock()
	if g != nil {
		if err := g.limit(memoryBytes, pids); err == nil {
			return g, nil
		}
		g.keeper = nil
		_ = g.Remove()
	}
	g = &Group{v2: m.v2, keeper: m, limits: [2]int64{-1, -1}}
	for _, p := range m.parents {
		dir := filepath.Join(p, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.keeper = nil
			g.Remove()
			return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		g.dirs = append(g.dirs, dir)
	}
	if m.v2 {
		_ = os.WriteFile(filepath.Join(g.dirs[0], "memory.swap.max"), []byte("0"), 0)
	}
	if err := g.limit(memoryBytes, pids); err != nil {
		g.keeper = nil
		g.Remove()
		return nil, err
	}
	return g, nil
}

// limit writes the memory and pids limits that differ from those last written.
func (g *Group) limit(memoryBytes int64, pids int) error {
	mem, pid := g.dirs[0], g.dirs[len(g.dirs)-1]
	memFile := "memory.limit_in_bytes"
	if g.v2 {
		memFile = "memory.max"
	}
	for _, w := range []struct {
		i    int
		path string
		v    int64
	}{{1, filepath.Join(pid, "pids.max"), int64(pids)}, {0, filepath.Join(mem, memFile), memoryBytes}} {
		if g.limits[w.i] == w.v {
			continue
		}
		if err := writeFile(w.path, strconv.FormatInt(w.v, 10)); err != nil {
			return fmt.Errorf("setting %s: %w", w.path, err)
		}
		g.limits[w.i] = w.v
	}
	return nil
}

// ProcsFiles are the files a process writes its pid to in order to join the group.
func (g *Group) ProcsFiles() []string {
	out := make([]string, len(g.dirs))
	for i, d := range g.dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// Kill kills every process in the group and returns once it is empty (or after a bound),
// reporting which. KillAll's first round is Signal's list and kill: the list is read once,
// not twice, for a group already empty (a child's, once its pid namespace is gone).
func (g *Group) Kill() bool {
	g.killFile()
	return KillAll(g.pids, 200)
}

// Signal sends SIGKILL to every process in the group, once, without waiting for them to go:
// the caller waits for the tree's exit its own way, and Kill (or Remove) makes sure.
func (g *Group) Signal() {
	g.killFile()
	for _, p := range g.pids() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// killFile kills every member through v2's cgroup.kill (nothing on v1).
func (g *Group) killFile() {
	if g.v2 {
		_ = writeFile(filepath.Join(g.dirs[0], "cgroup.kill"), "1")
	}
}

func (g *Group) pids() []int { return ReadPIDs(filepath.Join(g.dirs[len(g.dirs)-1], "cgroup.procs")) }

// KillAll sends SIGKILL to every process list returns, again and again, until it returns
// none or rounds have passed: a process may fork between the list and the kill. It reports
// whether the list came back empty.
func KillAll(list func() []int, rounds int) bool {
	for i := 0; i < rounds; i++ {
		pids := list()
		if len(pids) == 0 {
			return true
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(time.Duration(min(i+1, 10)) * time.Millisecond)
	}
	return false
}

// Empty reports whether no process is left in the group.
func (g *Group) Empty() bool { return len(g.pids()) == 0 }

// ReadPIDs reads a cgroup.procs file; a missing one lists nothing.
func ReadPIDs(path string) []int {
	b, err := ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if n, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Events are the limits the group's processes ran into.
type Events struct {
	OOMKills int64 // processes the memory limit killed
	PIDsMax  int64 // forks refused at pids.max
}

// Events reads the group's counters, counted from when this Group took its directories over.
func (g *Group) Events() Events { return g.since(g.counters()) }

// since is e counted from when this Group took its directories over.
func (g *Group) since(e Events) Events {
	return Events{OOMKills: e.OOMKills - g.base.OOMKills, PIDsMax: e.PIDsMax - g.base.PIDsMax}
}

// counters reads the directories' counters as the kernel keeps them, since they were made.
func (g *Group) counters() Events {
	mem, pid := g.dirs[0], g.dirs[len(g.dirs)-1]
	var e Events
	if g.v2 {
		e.OOMKills = Field(filepath.Join(mem, "memory.events"), "oom_kill")
	} else {
		e.OOMKills = Field(filepath.Join(mem, "memory.oom_control"), "oom_kill")
	}
	e.PIDsMax = Field(filepath.Join(pid, "pids.events"), "max")
	return e
}

// Field reads the value of key from a flat-keyed cgroup file ("key value" lines); 0 when
// either is missing.
func Field(path, key string) int64 {
	b, err := ReadFile(path)
	if err != nil {
		return 0
	}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		k, v, ok := bytes.Cut(line, []byte(" "))
		if ok && string(k) == key {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// ReadFile reads a small kernel file (a cgroup file, a /proc file) whole with plain system
// calls. os.ReadFile would make each one an *os.File of the runtime's poller (cgroupfs files
// can be polled): fcntl twice, epoll_ctl to add it and again to remove it, an fstat, and a
// finalizer, for a read that never blocks; several such files are read for every execution
// (docs/design.md §19.11).
func ReadFile(path string) ([]byte, error) {
	fd, err := ignoringEINTR(func() (int, error) { return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := ignoringEINTR(func() (int, error) { return syscall.Read(fd, b[len(b):cap(b)]) })
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// writeFile writes s to a cgroup file in one write(2), as os.WriteFile does, without the
// poller's work ReadFile tells of.
func writeFile(path, s string) error {
	fd, err := ignoringEINTR(func() (int, error) { return syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := ignoringEINTR(func() (int, error) { return syscall.Write(fd, []byte(s)) })
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	switch {
	case err != nil:
		return &os.PathError{Op: "write", Path: path, Err: err}
	case n < len(s):
		return &os.PathError{Op: "write", Path: path, Err: io.ErrShortWrite}
	}
	return nil
}

// ignoringEINTR calls fn until it fails with something other than EINTR.
func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// Join writes pid to each of the group's ProcsFiles, with writeFile's plain system calls: the
// host's join of a template's forked child, for every execution (docs/design.md §19.11).
func (g *Group) Join(pid int) error {
	for _, p := range g.ProcsFiles() {
		if err := writeFile(p, strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("joining cgroup %s: %v", p, err)
		}
	}
	return nil
}

// Remove kills what is left and removes the group's directories, or, when its Manager keeps
// groups (Keep) and the kill emptied it, hands them to the Manager's next New as a Group of
// their own: this one stays removed. It is idempotent.
func (g *Group) Remove() error {
	_, err := g.remove(false)
	return err
}

// RemoveEvents is Remove, and the group's Events as read once its kill has emptied it (or
// given up), before its directories go: a group kept for the next New counts from that same
// read, so the counters are read once, not once for Events and again for Keep (docs/design.md
// §19.11). A group removed before answers no events.
func (g *Group) RemoveEvents() (Events, error) { return g.remove(true) }

func (g *Group) remove(count bool) (Events, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return Events{}, nil
	}
	g.removed = true
	var ev Events
	if len(g.dirs) > 0 {
		emptied := g.Kill()
		var now Events
		read := false
		counters := func() Events {
			if !read {
				now, read = g.counters(), true
			}
			return now
		}
		if count {
			ev = g.since(counters())
		}
		if emptied && g.keeper != nil && g.keeper.take(g, counters) {
			return ev, nil
		}
	}
	var errs []error
	for _, d := range g.dirs {
		var err error
		for i := 0; i < 50; i++ {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return ev, errors.Join(errs...)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// Layout is a host's cgroup layout.
type Layout struct {
	V2 bool // the root is cgroup2
	// Hybrid: v1 controllers, and a cgroup2 mount that holds controllers of its own (crun
	// refuses this layout).
	Hybrid bool
	Detail string // what the layout is, in words
}

// cgroup2Magic is CGROUP2_SUPER_MAGIC, a cgroup2 file system's statfs type.
const cgroup2Magic = 0x63677270

func isCgroup2(path string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(path, &st) == nil && st.Type == cgroup2Magic
}

// DetectLayout reads the layout of the hierarchies mounted at root (Root on a host).
func DetectLayout(root string) Layout {
	if isCgroup2(root) {
		return Layout{V2: true, Detail: "cgroup v2"}
	}
	unified := filepath.Join(root, "unified")
	if !isCgroup2(unified) {
		return Layout{Detail: "cgroup v1"}
	}
	ctrl, _ := os.ReadFile(filepath.Join(unified, "cgroup.controllers"))
	if c := strings.Join(strings.Fields(string(ctrl)), " "); c != "" {
		return Layout{Hybrid: true, Detail: fmt.Sprintf("cgroup v1 controllers, and a cgroup v2 mount at %s holding %s", unified, c)}
	}
	return Layout{Detail: "cgroup v1, and an empty cgroup v2 mount at " + unified}
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

func (h hierarchy) has(controller string) bool { return contains(h.controllers, controller) }

// Parent is one execution's cgroup made for a container runtime: the parent it nests the
// container (and its monitor) under. It carries the memory limit, and its counters outlive
// the container's own cgroup. The container's processes are those of its subgroups other
// than the monitor's.
type Parent struct {
	path    string // the runtime's --cgroup-parent: "/<base>/<name>"
	monitor string // the subgroup of the runtime's monitor (podman's conmon), not the container's
	v2      bool
	mem     string // the directory holding the memory limit and the OOM count
	cpu     string // the directory holding the CPU usage
	procs   string // a directory whose subdirectories list the container's processes

	mu sync.Mutex
	// seenOOM is the most OOM kills the container's own cgroups were seen to count: on v1 the
	// count stays where the victim was, and the runtime removes that cgroup with the container.
	seenOOM int64
}

// NewParent creates the cgroup base/name in every hierarchy the runtime uses, with
// memoryBytes as its memory limit (swap included). monitor names the subgroup the runtime's
// monitor runs in, whose processes and CPU are not the container's.
func NewParent(base, name, monitor string, memoryBytes int64) (*Parent, error) {
	g := &Parent{path: "/" + base + "/" + name, monitor: monitor}
	limit := strconv.FormatInt(memoryBytes, 10)
	if isCgroup2(Root) {
		g.v2 = true
		base := filepath.Join(Root, base)
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		enable(Root)
		enable(base)
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		g.mem, g.cpu, g.procs = dir, dir, dir
		enable(dir)
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(limit), 0); err != nil {
			g.Remove()
			return nil, fmt.Errorf("setting memory.max: %w", err)
		}
		_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
		return g, nil
	}
	for _, h := range hierarchies(Root) {
		if h.has("memory") {
			g.mem = filepath.Join(h.dir, base, name)
		}
		if h.has("cpuacct") {
			g.cpu = filepath.Join(h.dir, base, name)
		}
	}
	if g.mem == "" || g.cpu == "" {
		return nil, errors.New("no cgroup v1 memory and cpuacct hierarchies")
	}
	g.procs = g.mem
	for _, d := range []string{g.mem, g.cpu} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			g.Remove()
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(g.mem, "memory.limit_in_bytes"), []byte(limit), 0); err != nil {
		g.Remove()
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

// Path is the runtime's --cgroup-parent: "/<base>/<name>".
func (g *Parent) Path() string { return g.path }

// PIDs lists the processes of the container, in this process's pid namespace: those in the
// parent's subgroups other than the runtime monitor's.
func (g *Parent) PIDs() []int {
	entries, _ := os.ReadDir(g.procs)
	var pids []int
	for _, e := range entries {
		if e.IsDir() && e.Name() != g.monitor {
			pids = append(pids, ReadPIDs(filepath.Join(g.procs, e.Name(), "cgroup.procs"))...)
		}
	}
	return pids
}

// End sends SIGKILL to every process of the container once, then lifts the memory limit: a
// process exiting in a memory cgroup that is full of what the container wrote to its tmpfs
// mounts (which only the container's end frees) can wait on that memory indefinitely. Every
// process is killed first, so none can use what the lifted limit allows.
func (g *Parent) End() {
	g.NoteOOM()
	for _, p := range g.PIDs() {
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

// Kill kills every process of the container, and returns once none is left (or after a bound).
func (g *Parent) Kill() { KillAll(g.PIDs, 100) }

// CPUSeconds is the CPU time the container used: the parent's usage, which keeps what
// removed subgroups used, less the monitor's.
func (g *Parent) CPUSeconds() float64 {
	if g.v2 {
		usec := func(dir string) int64 { return Field(filepath.Join(dir, "cpu.stat"), "usage_usec") }
		return float64(usec(g.cpu)-usec(filepath.Join(g.cpu, g.monitor))) / 1e6
	}
	ns := func(dir string) int64 {
		b, _ := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	return float64(ns(g.cpu)-ns(filepath.Join(g.cpu, g.monitor))) / 1e9
}

// OOMKills counts the processes the memory limit killed: on v2 the parent's count, which
// includes its subgroups'; on v1 what NoteOOM saw in the parent and its subgroups.
func (g *Parent) OOMKills() int64 {
	g.NoteOOM()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seenOOM
}

// NoteOOM records the OOM kills counted so far. Call it while the container's cgroups still
// exist: when the channel ends, when its interpreter exits, and before it is killed.
//
// Only the parent has a limit, so every OOM kill below it is that limit's, the runtime
// monitor's included (it is charged to the same limit, and a program that filled the memory
// with files leaves the monitor, or the cleanup it starts, none). On v2 the parent's
// memory.events counts its subgroups' kills; on v1 each kill is counted only in the victim's
// own cgroup (memory.oom_control's oom_kill), so the parent and every subgroup are summed.
func (g *Parent) NoteOOM() {
	var n int64
	if g.v2 {
		n = Field(filepath.Join(g.mem, "memory.events"), "oom_kill")
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
		n := Field(filepath.Join(dir, "memory.oom_control"), "oom_kill")
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

// Remove kills what is left and removes the cgroup from every hierarchy (the runtime makes
// the parent in each one it uses). It is idempotent.
func (g *Parent) Remove() error {
	g.Kill()
	var errs []error
	for _, h := range hierarchies(Root) {
		if err := removeTree(filepath.Join(h.dir, strings.TrimPrefix(g.path, "/"))); err != nil {
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

// SweepParents removes every Parent under base whose name dead accepts, in every hierarchy,
// killing what is left in it first: the sweep of dead owners' leftovers. monitor is as for
// NewParent.
func SweepParents(base, monitor string, dead func(name string) bool) {
	for _, h := range hierarchies(Root) {
		dir := filepath.Join(h.dir, base)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				g := &Parent{monitor: monitor, procs: filepath.Join(dir, e.Name())}
				g.Kill()
				_ = removeTree(g.procs)
			}
		}
	}
}
