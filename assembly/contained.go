package assembly

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// serverCPUSeconds is a contained upstream server's CPU limit: it lives as long as its
// session, so a profile's cpu_seconds, sized for one program, would end it mid-session.
const serverCPUSeconds = 24 * 3600

// containedLauncher starts an upstream's command through profile pname's backend (opened on
// first use): in the same namespaces, identity, limits (but CPU time) and network as a
// program of that profile, with the channel as its stdin and stdout, and the host paths the
// upstream declares (paths, nil for none) bound into its root.
func (e Env) containedLauncher(pname string, p configs.Profile, paths *configs.UpstreamPaths) upstream.Launcher {
	var binds []engine.Path
	if paths != nil {
		for _, s := range paths.ReadOnly {
			binds = append(binds, engine.Path{Path: s})
		}
		for _, s := range paths.ReadWrite {
			binds = append(binds, engine.Path{Path: s, Writable: true})
		}
	}
	var (
		once    sync.Once
		backend engine.Backend
		level   engine.Level
		openErr error
	)
	return func(ctx context.Context, command []string, env map[string]string) (*upstream.Launched, error) {
		once.Do(func() {
			if level, openErr = engine.ParseLevel(p.Isolation); openErr == nil {
				backend, _, openErr = e.openBackend(context.Background(), pname, p, level, "")
			}
		})
		if openErr != nil {
			return nil, openErr
		}
		cb, ok := backend.(engine.CommandBackend)
		if !ok || !cb.RunsCommands() {
			return nil, fmt.Errorf("profile %q's %s backend cannot run a server contained (namespaces and bwrap can)", pname, backend.Name())
		}
		path, err := exec.LookPath(command[0])
		if err == nil {
			path, err = filepath.Abs(path)
		}
		if err != nil {
			return nil, fmt.Errorf("finding %s: %w", command[0], err)
		}
		terms := engine.Terms{Limits: engineLimits(p.HardLimits, engine.DefaultLimits), Network: engine.NetworkNone, Isolation: level}
		terms.CPUSeconds, terms.WallSeconds = serverCPUSeconds, serverCPUSeconds
		spec := engine.LaunchSpec{Terms: terms, Command: append([]string{path}, command[1:]...), CommandEnv: env, Paths: binds, Stdout: io.Discard}
		var pol *egress.Policy
		var ca *egress.CA
		if p.Network != nil {
			if pol, err = e.egressPolicy(p); err != nil {
				return nil, err
			}
			if ca, err = egress.NewCA(); err != nil {
				return nil, err
			}
			spec.Terms.Network, spec.Egress = engine.NetworkRules, &engine.EgressLaunch{CAPEM: ca.PEM()}
		}
		pr, pw := io.Pipe()
		spec.Stderr = pw
		child, err := backend.Start(ctx, spec)
		if err != nil {
			pw.Close()
			return nil, err
		}
		var proxy *egress.Proxy
		if spec.Egress != nil {
			ec, ok := child.(engine.EgressChild)
			if !ok || ec.EgressListener() == nil {
				child.Close()
				pw.Close()
				return nil, fmt.Errorf("profile %q's backend gave the server no route to the egress proxy", pname)
			}
			proxy = egress.New(pol, ca)
			proxy.Serve(ec.EgressListener())
		}
		ch := child.Channel()
		return &upstream.Launched{
			Stdin:  halfClose{ch},
			Stdout: ch,
			Stderr: pr,
			Wait: func() error {
				e := child.Wait()
				switch {
				case e.Err != nil:
					return e.Err
				case e.Signal != "":
					return fmt.Errorf("killed by %s", e.Signal)
				case e.Code != 0:
					return fmt.Errorf("exit status %d", e.Code)
				}
				return nil
			},
			Kill: child.Kill,
			Release: sync.OnceFunc(func() {
				child.Close()
				ch.Close()
				pw.Close()
				if proxy != nil {
					proxy.Close()
				}
			}),
		}, nil
	}
}

// halfClose ends the server's input only, so it may still answer what it has read.
type halfClose struct{ c io.ReadWriteCloser }

func (h halfClose) Write(b []byte) (int, error) { return h.c.Write(b) }
func (h halfClose) Close() error {
	if cw, ok := h.c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return h.c.Close()
}

// upstreamSandbox is how stdio upstream u will run here: contained (by its profile's
// backend), or not and why. A profile of backend local that asks only for isolation process
// promises no kernel boundary: it contains the server where this host can (local's pick is
// namespaces or bwrap, which it prefers whenever available) and leaves it unconfined, saying
// so, where it cannot. That is the default the embedded and example configs use (`sandbox:
// default`), so a new config contains its servers wherever a backend reaches isolated and
// still runs elsewhere. A profile naming its backend, or asking for isolated, contains the
// server or fails its start: it is never run with less than the profile says.
func upstreamSandbox(cfg *Config, u configs.Upstream) (contained bool, state string) {
	if u.Sandbox == "" {
		state = "UNCONFINED: runs as a process of this server's user, with its files and network (no sandbox: PROFILE)"
		if pick, err := engine.SelectLocal(cfg.detectLocal(configs.Profile{}), engine.LevelIsolated); err == nil {
			state += "; this host can contain it (" + pick.Name + "): sandbox: a profile of backend local, namespaces or bwrap"
		}
		return false, state
	}
	p, _ := cfg.Profile(u.Sandbox)
	level, _ := engine.ParseLevel(p.Isolation)
	if p.Backend != configs.BackendLocal || level.AtLeast(engine.LevelIsolated) {
		return true, "contained by profile " + u.Sandbox + "'s " + p.Backend + " backend (docs/design.md §18)"
	}
	found := cfg.detectLocal(p)
	pick, err := engine.SelectLocal(found, level)
	if err == nil && containsServers(pick.Name) {
		return true, "contained by profile " + u.Sandbox + "'s local backend, " + pick.Name + " here (docs/design.md §18)"
	}
	var why []string
	for _, b := range found {
		if containsServers(b.Name) && !b.Available {
			why = append(why, b.Name+": "+b.Reason)
		}
	}
	return false, fmt.Sprintf("UNCONFINED: profile %s is local at isolation %s, and no backend of this host can contain a server (%s)",
		u.Sandbox, level, strings.Join(why, "; "))
}

// containsServers says whether local backend name can run a server contained: namespaces and
// bwrap run commands (engine.CommandBackend), the others do not.
func containsServers(name string) bool {
	return name == configs.BackendNamespaces || name == configs.BackendBwrap
}
