//go:build !linux

package container

// PauseWatch: rootless podman's pause process is Linux's (pause_linux.go); off Linux podman
// runs in its machine's VM, and there is nothing of it to watch here.
type PauseWatch struct{}

// WatchPause returns nil: nothing to watch.
func WatchPause() *PauseWatch { return nil }

// End does nothing.
func (w *PauseWatch) End() (ended, kept []int) { return nil, nil }
