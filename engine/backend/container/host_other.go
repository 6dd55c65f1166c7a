//go:build !linux

package container

import (
	"errors"
	"syscall"
)

// Off Linux the engine always runs containers in a VM (Docker Desktop, a Podman machine) or
// on another machine: no cgroup, socket or pid of its containers is this host's
// (host_linux.go has what a local engine gets).

// installGuidance says what to install, and start, when no engine answers: the engine's VM
// must be running for its CLI to answer.
const installGuidance = "install Docker Desktop and start it, or install Podman and start its machine " +
	"(podman machine init, then podman machine start); then build the image (mcp-sandbox image build)"

func hostCgroups() (version string, hybrid bool, detail string) { return "", false, "" }

func newExecCgroup(string, string, int64) (execCgroup, error) {
	return nil, errors.New("execution cgroups are Linux's")
}

func hostNprocLimit(processCount int) uint64 { return uint64(processCount) + 1<<16 }

// cliAttr: the runtime's CLI is an ordinary child (the channel's end stops the container when
// the server dies: its stdin closes).
func cliAttr() *syscall.SysProcAttr { return nil }
