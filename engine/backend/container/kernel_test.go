//go:build linux

package container_test

import (
	"context"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
)

// The container half of the kernel-surface fix, run (issue 38: the third review only read
// it). TestContract runs every kernel case under terms without network, where the container
// has --network=none and the policy's seccomp-network-none.json. Terms that grant network
// give it the runtime's network namespace, with interfaces, routes and netfilter tables to
// reach, and the policy's other profile, seccomp.json: the kernel cases run again under
// those terms, each refused.
func TestKernelSurfaceWithNetwork(t *testing.T) {
	var r *engine.Runner
	sandboxtest.RunKernelSurface(t, sandboxtest.Config{
		Level:   engine.LevelIsolated,
		Network: engine.NetworkUnrestricted,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			requireContainer(t, container.Options{})
			b, err := container.New(context.Background(), &container.Options{})
			r = sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: ceiling, Isolation: engine.LevelIsolated, AllowNetwork: true})
			return r
		},
	})
	if r == nil {
		return // skipped
	}
	// The refusals are the policy's, under either profile: one filter, and a netlink socket
	// to netfilter refused with its EACCES (the runtime's default profile allows that socket).
	program := `import socket
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12).close()
    netfilter = "made"
except OSError as e:
    netfilter = e.errno
routes = len(open("/proc/net/route").read().splitlines()) - 1
return {"seccomp": status.get("Seccomp", "").strip(), "filters": status.get("Seccomp_filters", "").strip(),
        "netfilter": netfilter, "routes": routes}`
	for _, network := range []engine.Network{engine.NetworkNone, engine.NetworkUnrestricted} {
		var got struct {
			Seccomp, Filters string
			Netfilter        any
			Routes           int
		}
		res := r.Run(context.Background(), engine.Execution{Program: program,
			Terms: engine.Terms{Isolation: engine.LevelIsolated, Network: network}})
		wantValue(t, res, &got)
		if got.Seccomp != "2" || got.Filters != "1" || got.Netfilter != float64(13) {
			t.Errorf("network %s: seccomp mode %q with %q filters, a netfilter socket %v; want the policy's one filter (mode 2, EACCES)",
				network, got.Seccomp, got.Filters, got.Netfilter)
		}
		if (network == engine.NetworkUnrestricted) != (got.Routes > 0) {
			t.Errorf("network %s: %d routes: the terms did not reach the container", network, got.Routes)
		}
		t.Logf("network %s: seccomp mode %s, %s filter, netfilter socket refused with errno %v, %d routes", network, got.Seccomp,
			got.Filters, got.Netfilter, got.Routes)
	}
}
