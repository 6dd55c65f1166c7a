package assembly

import (
	"context"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// readyRecheck is how often /readyz may describe again a profile that was not ready.
const readyRecheck = 5 * time.Second

// readyDescribeTimeout bounds one such description, so a probe is answered in time.
const readyDescribeTimeout = 3 * time.Second

// readiness answers /readyz: every profile in use has described itself ready. A profile that
// was not ready at startup is described again when /readyz is asked, at most every
// readyRecheck: a server started before its sandbox services (a Kubernetes rollout starts
// both at once) becomes ready when they answer, instead of never. A profile once ready stays
// so: every run describes its sandbox anyway and refuses with backend_unavailable when it
// must, and a balancer that dropped every replica because the workers were gone would turn
// those refusals into connection errors and take list_tools and the rest down with them. A
// profile whose backend could not even be opened needs a restart and stays not ready.
type readiness struct {
	ps *profileSet

	mu      sync.Mutex // guards the fields below; held while describing, so probes take turns
	ready   map[string]bool
	checked time.Time
}

func newReadiness(ps *profileSet) *readiness {
	r := &readiness{ps: ps, ready: map[string]bool{}}
	for name, d := range ps.described {
		r.ready[name] = d.Ready
	}
	return r
}

// Ready reports whether every profile has been ready. Safe for concurrent use.
func (r *readiness) Ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := true
	for _, ok := range r.ready {
		all = all && ok
	}
	if all || time.Since(r.checked) < readyRecheck {
		return all
	}
	r.checked = time.Now()
	all = true
	for name, ok := range r.ready {
		if !ok {
			if sb, open := r.ps.runners[name]; open {
				ok = describedReady(sb)
				r.ready[name] = ok
			}
		}
		all = all && ok
	}
	return all
}

func describedReady(sb engine.Sandbox) bool {
	ctx, cancel := context.WithTimeout(context.Background(), readyDescribeTimeout)
	defer cancel()
	return sb.Describe(ctx).Ready
}
