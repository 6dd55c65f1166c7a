//go:build linux

package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
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

// Manager creates groups under one parent directory per hierarchy.
type Manager struct {
	v2      bool
	parents []string // v2: one; v1: memory, pids
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

// Group is one execution's cgroup.
type Group struct {
	v2   bool
	dirs []string // v2: one; v1: memory, pids

	mu      sync.Mutex
	removed bool
}

// New creates the group id with the given limits.
func (m *Manager) New(id string, memoryBytes int64, pids int) (*Group, error) {
	g := &Group{v2: m.v2}
	for _, p := range m.parents {
		dir := filepath.Join(p, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.Remove()
			return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		g.dirs = append(g.dirs, dir)
	}
	mem, pid := g.dirs[0], g.dirs[len(g.dirs)-1]
	writes := [][2]string{{filepath.Join(pid, "pids.max"), strconv.Itoa(pids)}}
	if m.v2 {
		writes = append(writes, [2]string{filepath.Join(mem, "memory.max"), strconv.FormatInt(memoryBytes, 10)},
			[2]string{filepath.Join(mem, "memory.swap.max"), "0"})
	} else {
		writes = append(writes, [2]string{filepath.Join(mem, "memory.limit_in_bytes"), strconv.FormatInt(memoryBytes, 10)})
	}
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil && !strings.HasSuffix(w[0], "swap.max") {
			g.Remove()
			return nil, fmt.Errorf("setting %s: %w", w[0], err)
		}
	}
	return g, nil
}

// ProcsFiles are the files a process writes its pid to in order to join the group.
func (g *Group) ProcsFiles() []string {
	out := make([]string, len(g.dirs))
	for i, d := range g.dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// Kill kills every process in the group and returns once it is empty (or after a bound).
func (g *Group) Kill() {
	g.Signal()
	KillAll(g.pids, 200)
}

// Signal sends SIGKILL to every process in the group, once, without waiting for them to go:
// the caller waits for the tree's exit its own way, and Kill (or Remove) makes sure.
func (g *Group) Signal() {
	if g.v2 {
		_ = os.WriteFile(filepath.Join(g.dirs[0], "cgroup.kill"), []byte("1"), 0)
	}
	for _, p := range g.pids() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

func (g *Group) pids() []int { return ReadPIDs(filepath.Join(g.dirs[len(g.dirs)-1], "cgroup.procs")) }

// KillAll sends SIGKILL to every process list returns, again and again, until it returns
// none or rounds have passed: a process may fork between the list and the kill.
func KillAll(list func() []int, rounds int) {
	for i := 0; i < rounds; i++ {
		pids := list()
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(time.Duration(min(i+1, 10)) * time.Millisecond)
	}
}

// Empty reports whether no process is left in the group.
func (g *Group) Empty() bool { return len(g.pids()) == 0 }

// ReadPIDs reads a cgroup.procs file; a missing one lists nothing.
func ReadPIDs(path string) []int {
	b, err := os.ReadFile(path)
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

// Events reads the group's counters.
func (g *Group) Events() Events {
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
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Remove kills what is left and removes the group's directories. It is idempotent.
func (g *Group) Remove() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed {
		return nil
	}
	g.removed = true
	if len(g.dirs) > 0 {
		g.Kill()
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
	return errors.Join(errs...)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
