//go:build linux

package owner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// self is this process's tag and what DeadName compares against, read once; the first use
// also takes this process's owner lock.
var self = sync.OnceValue(func() (s struct {
	tag, pidns, boot string
	procOK           bool
	locks            string // the lock directory, "" when there is none
	locksWhy         string // why there is none
	lock             *os.File
}) {
	start, err := startTime(os.Getpid())
	s.pidns = pidNamespace()
	s.boot = bootID()
	// /proc shows this process's pid namespace only when its idea of our pid is ours.
	s.procOK = err == nil && s.pidns != "" && s.boot != ""
	if s.procOK {
		s.tag = fmt.Sprintf("%d.%d.%s.%s", os.Getpid(), start, s.pidns, s.boot)
	}
	s.locks, s.locksWhy = lockDir()
	if s.locksWhy != "" {
		slog.Warn("owner locks: " + s.locksWhy)
	}
	s.lock = holdLock(s.locks, s.tag)
	return s
})

// LockDirProblem says why this process has no owners' lock directory, or "": another account
// made it, it may be written by others, or it cannot be made. The first use of a tag logs it
// too (a warning: sweeps then cannot prove an owner of another pid namespace dead).
func LockDirProblem() string { return self().locksWhy }

// Tag is this process's owner tag; "" when it cannot be made (no /proc).
func Tag() string { return self().tag }

// Name returns prefix, this process's tag and a random suffix: "<prefix>-<tag>-<hex>", or
// "<prefix>-<hex>" when there is no tag.
func Name(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if t := Tag(); t != "" {
		return prefix + "-" + t + "-" + hex.EncodeToString(b[:])
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

var (
	tagged = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`-(([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9a-f]{8}))-[0-9a-f]+$`)
	})
	tagOnly = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9a-f]{8})$`) })
)

// DeadName reports whether name (as Name made it) carries the tag of a provably dead owner.
func DeadName(name string) bool {
	m := tagged().FindStringSubmatch(name)
	return m != nil && dead(m[1], self().locks)
}

// DeadNameThisBoot is DeadName for what may belong to another machine: a container runtime's
// containers (the daemon may be a remote one, shared with servers elsewhere). An owner of
// another boot is then not proof of death but unknown, and left alone; a local runtime's
// leftovers from before a reboot are left too.
func DeadNameThisBoot(name string) bool {
	m := tagged().FindStringSubmatch(name)
	return m != nil && self().procOK && m[5] == self().boot && dead(m[1], self().locks)
}

// dead reports whether tag's owner is provably dead. Where its pid and start time can be
// checked (this boot's, in this pid namespace) they decide; elsewhere a free lock does.
func dead(tag, locks string) bool {
	if gone, known := pidDead(tagOnly().FindStringSubmatch(tag)); known {
		return gone
	}
	return locks != "" && lockFree(filepath.Join(locks, tag+".lock"))
}

// pidDead is the proof by boot, pid and start time (m is tagOnly's match); known is false
// where it cannot decide: another pid namespace, or no /proc of ours.
func pidDead(m []string) (gone, known bool) {
	me := self()
	if m == nil || !me.procOK {
		return false, false
	}
	if m[4] != me.boot {
		return true, true // another boot: its every process is gone
	}
	if m[3] != me.pidns {
		return false, false // another pid namespace: its pid means nothing here
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 0 {
		return false, true
	}
	// kill(pid, 0) in this pid namespace: ESRCH is proof, whatever /proc may hide (hidepid).
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true, true
	}
	start, err := startTime(pid)
	return err == nil && strconv.FormatUint(start, 10) != m[2], true
}

// Sweep removes, with remove, every entry of dir named prefix-… whose owner is provably dead,
// and returns how many it removed. A missing dir is nothing to sweep.
func Sweep(dir, prefix string, remove func(path string) error) int {
	pruneOnce()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") && DeadName(e.Name()) {
			if remove(filepath.Join(dir, e.Name())) == nil {
				n++
			}
		}
	}
	return n
}

// pruneOnce prunes the lock directory at a process's first sweep, when no process pruned it
// in the last pruneEvery.
var pruneOnce = sync.OnceFunc(func() {
	if locks := self().locks; locks != "" && pruneDue(locks, time.Now()) {
		pruneLocks(locks, func(tag string) bool { return dead(tag, locks) })
	}
})

// startTime is field 22 of /proc/pid/stat, after the command in parentheses.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("owner: /proc/%d/stat: no command", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("owner: /proc/%d/stat: short", pid)
	}
	// f[0] is field 3 (state); the start time is field 22.
	return strconv.ParseUint(f[19], 10, 64)
}

// pidNamespace is the inode of this process's pid namespace, "" when /proc does not show this
// process (a /proc of another pid namespace).
func pidNamespace() string {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil || !strings.HasPrefix(string(b), strconv.Itoa(os.Getpid())+" ") {
		return ""
	}
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	inode := strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	if _, err := strconv.ParseUint(inode, 10, 64); err != nil {
		return ""
	}
	return inode
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	id := strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "")
	if len(id) < 8 {
		return ""
	}
	return id[:8]
}
