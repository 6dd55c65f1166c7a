//go:build !linux

package container

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
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

// installedCLI finds kind's CLI where Docker Desktop and Podman install it, for a server whose
// PATH does not name that directory (a desktop app starts its servers with a short PATH).
func installedCLI(kind string) (string, error) {
	var dirs []string
	exe := kind
	switch runtime.GOOS {
	case "darwin":
		dirs = []string{"/opt/homebrew/bin", "/usr/local/bin", "/opt/podman/bin", "/Applications/Docker.app/Contents/Resources/bin"}
	case "windows":
		exe += ".exe"
		for _, env := range []string{"ProgramFiles", "ProgramW6432"} {
			if pf := os.Getenv(env); pf != "" {
				dirs = append(dirs, filepath.Join(pf, "Docker", "Docker", "resources", "bin"), filepath.Join(pf, "RedHat", "Podman"))
			}
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, exe)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", errors.New(kind + ": not installed")
}
