//go:build linux

package container

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Rootless podman keeps one process per user, its pause process, that holds the user
// namespace every later podman command of that user joins; the first command creates it and
// nothing ends it. A probe (doctor, Detect, a profile's description) must not leave one
// behind, so it is watched: what a PauseWatch did not see before is the probe's, and it is
// ended unless another podman process of the user may be relying on it by then.

// PauseWatch notes the rootless podman pause processes of this user that exist when it
// starts, so that End can end the one started after it.
type PauseWatch struct {
	uid    int
	before map[int]bool
}

// WatchPause starts a watch: nil as root, where podman keeps no pause process.
func WatchPause() *PauseWatch {
	uid := os.Geteuid()
	if uid == 0 {
		return nil
	}
	w := &PauseWatch{uid: uid, before: map[int]bool{}}
	for _, p := range userProcesses(uid) {
		if p.pause {
			w.before[p.pid] = true
		}
	}
	return w
}

// End ends every pause process of this user that started since WatchPause, unless another
// podman process of the user (a command, or a container's monitor) is alive now: those join
// the pause process's namespace, and a container's would be left in one nothing can join.
// It returns the pause processes it ended and those it left for that reason. It is safe on a
// nil watch.
func (w *PauseWatch) End() (ended, kept []int) {
	if w == nil {
		return nil, nil
	}
	procs := userProcesses(w.uid)
	var fresh []int
	inUse := false
	for _, p := range procs {
		switch {
		case p.pause && !w.before[p.pid]:
			fresh = append(fresh, p.pid)
		case p.podman:
			inUse = true
		}
	}
	if inUse {
		return nil, fresh
	}
	for _, pid := range fresh {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			ended = append(ended, pid)
		}
	}
	return ended, nil
}

// userProcess is one process of the watched user, as far as podman is concerned.
type userProcess struct {
	pid    int
	pause  bool // podman's pause process: "podman pause", or catatonit -P
	podman bool // another podman process: a command, or a container's monitor (conmon)
}

// userProcesses lists the processes whose real uid is uid that are podman's.
func userProcesses(uid int) []userProcess {
	entries, _ := os.ReadDir("/proc")
	var out []userProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		var st syscall.Stat_t
		if syscall.Stat(dir, &st) != nil || int(st.Uid) != uid {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			continue
		}
		switch name := string(bytes.TrimSpace(comm)); name {
		case "podman pause":
			out = append(out, userProcess{pid: pid, pause: true})
		case "catatonit":
			cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
			if bytes.Contains(cmdline, []byte("\x00-P")) {
				out = append(out, userProcess{pid: pid, pause: true})
			}
		case "podman", "conmon":
			out = append(out, userProcess{pid: pid, podman: true})
		}
	}
	return out
}
