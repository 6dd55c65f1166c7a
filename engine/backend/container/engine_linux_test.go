package container_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// The engine "elsewhere" of the remote tests, on Linux: a podman service this test binary
// starts on a socket of its own, once for every test that needs it, and stops when the tests
// end. Its containers are the service's children, so inside the tests' pid namespace
// (gate.Main) they are ours: the hostile programs run there, and the survivor scan sees them.
var service struct {
	once sync.Once
	cmd  *exec.Cmd
	dir  string
	host string // unix://…/podman.sock
	why  string // why there is none
}

// remoteEngine points the container CLI at the remote engine through its environment alone
// (CONTAINER_HOST, as a Mac's podman reaches its machine), for t and its subtests, and returns
// the options that name the runtime. It skips, or fails where "container" is required, when
// there is no podman to start a service with.
func remoteEngine(t *testing.T) string {
	t.Helper()
	service.once.Do(startEngine)
	gate.Require(t, "container", service.why == "", service.why)
	t.Setenv("CONTAINER_HOST", service.host)
	t.Setenv("DOCKER_HOST", service.host)
	return "podman"
}

func startEngine() {
	podman, err := exec.LookPath("podman")
	if err != nil {
		service.why = "podman is not installed"
		return
	}
	if service.dir, err = os.MkdirTemp("", "mcp-sandbox-engine-"); err != nil {
		service.why = err.Error()
		return
	}
	sock := filepath.Join(service.dir, "podman.sock")
	service.host = "unix://" + sock
	cmd := exec.Command(podman, "system", "service", "--time=0", service.host)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		service.why = "starting podman system service: " + err.Error()
		return
	}
	service.cmd = cmd
	deadline := time.Now().Add(gate.Scaled(30 * time.Second))
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		probe := exec.CommandContext(ctx, podman, "--remote", "--url", service.host, "info", "--format", "{{.Host.ServiceIsRemote}}")
		out, err := probe.Output()
		cancel()
		if err == nil && string(out) == "true\n" {
			return
		}
		if time.Now().After(deadline) {
			service.why = "the podman service did not answer on " + service.host
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopEngine ends the service, if the tests started it.
func stopEngine() {
	if service.cmd != nil {
		_ = service.cmd.Process.Kill()
		_ = service.cmd.Wait()
	}
	if service.dir != "" {
		os.RemoveAll(service.dir)
	}
}
