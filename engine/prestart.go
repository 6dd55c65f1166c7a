package engine

import "context"

// prestarted is the one child Prestart started ahead of its execution; the Runner's mu guards
// the pointer to it, and done says when its start has ended (p or err set).
type prestarted struct {
	key  poolKey
	done chan struct{}
	p    *prepared
	err  error
}

// Prestart starts one child for owner's next execution with terms t now, in the background,
// without keeping a pool: a one-shot command (`mcp-sandbox run`) starts its child while it
// opens its ledger and records the execution, rather than after. The next Run for exactly
// that owner and terms takes it (waiting for its start to end, if need be); it is graded for
// that execution as any child is, and nothing is sent to it before its Run. A Runner holds
// at most one: Prestart does nothing while one is held, or once the Runner is closed. Close
// ends one that no Run took.
func (r *Runner) Prestart(owner string, t Terms) {
	k := poolKey{owner: owner, terms: r.Terms(t)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.pre != nil {
		return
	}
	pre := &prestarted{key: k, done: make(chan struct{})}
	r.pre = pre
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		defer close(pre.done)
		pre.p, pre.err = r.prepare(context.Background(), k.owner, k.terms, false)
	}()
}

// takePrestarted returns the prestarted child for k once its start has ended, or nil when
// there is none for k, its start failed, or it died waiting (the caller then starts one of
// its own). ctx ending while it waits leaves the child to Close.
func (r *Runner) takePrestarted(ctx context.Context, k poolKey) *prepared {
	r.mu.Lock()
	pre := r.pre
	if pre == nil || pre.key != k {
		r.mu.Unlock()
		return nil
	}
	r.pre = nil
	r.mu.Unlock()
	select {
	case <-pre.done:
	case <-ctx.Done():
		r.discardPrestarted(pre)
		return nil
	}
	if pre.err != nil {
		return nil
	}
	if pre.p.dead() {
		r.discardPrestarted(pre)
		return nil
	}
	return pre.p
}

// discardPrestarted ends pre's child, once its start has ended, in the background.
func (r *Runner) discardPrestarted(pre *prestarted) {
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		<-pre.done
		if pre.p != nil {
			pre.p.discard()
		}
	}()
}
