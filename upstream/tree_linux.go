package upstream

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// maxTreeRounds bounds stopTree's passes over /proc; each pass stops what the last one found,
// so a tree forking as it is stopped is caught within a few.
const maxTreeRounds = 16

// stopTree stops (SIGSTOP) root and every process that belongs to its tree, and returns them:
// the descendants of root by parent pid, the members of root's process group, and any process
// whose environment carries marker (one that started its own session and was reparented to
// init). Stopped processes can neither fork nor exit, so the set stops growing; the caller
// kills them. Without alive, root itself is not signalled (it was reaped; its pid may be
// another process's by now).
func stopTree(root int, marker string, alive bool) []int {
	want := []byte(treeMarkerEnv + "=" + marker + "\x00")
	seen := map[int]bool{}
	var members []int
	stop := func(pid int) {
		if !seen[pid] && pid != os.Getpid() {
			seen[pid] = true
			members = append(members, pid)
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
	}
	if alive {
		stop(root)
	} else {
		seen[root] = true
	}
	for range maxTreeRounds {
		before := len(members)
		procs := readProcs()
		children := map[int][]int{}
		for _, p := range procs {
			children[p.ppid] = append(children[p.ppid], p.pid)
			if p.pgid == root {
				stop(p.pid)
			}
		}
		for i := 0; i < len(members); i++ { // members grows as the walk finds children
			for _, c := range children[members[i]] {
				stop(c)
			}
		}
		for _, p := range procs {
			if !seen[p.pid] && hasEnv(p.pid, want) {
				stop(p.pid)
			}
		}
		if len(members) == before {
			break
		}
	}
	return members
}

type procEntry struct{ pid, ppid, pgid int }

// readProcs lists every process with its parent and process group, from /proc/*/stat.
func readProcs() []procEntry {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]procEntry, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		pgid, _ := strconv.Atoi(string(f[2]))
		out = append(out, procEntry{pid, ppid, pgid})
	}
	return out
}

// hasEnv reports whether pid's environment holds the entry want ("NAME=value\x00").
func hasEnv(pid int, want []byte) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return bytes.HasPrefix(b, want) || bytes.Contains(b, append([]byte{0}, want...))
}
