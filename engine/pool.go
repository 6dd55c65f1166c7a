package engine

import (
	"context"
	"runtime"
	"slices"
	"time"
)

// WarmPolicy sizes a Runner's warm pools: children started, and their containment reported,
// ahead of the executions that will use them. There is one pool per owner and terms; each
// keeps Min children ready once it has been used or prewarmed, grows towards Max while
// executions find it empty or empty it, and shrinks back to Min once unused for Idle. The zero
// value keeps none.
type WarmPolicy struct {
	Min, Max int
	// Idle is how long a pool may go unused before it shrinks to Min (default 5 minutes).
	Idle time.Duration
}

// WarmStats is what a Runner's warm pools hold right now, and how executions found them: the
// figures an operator's metrics read (Runner.WarmStats).
type WarmStats struct {
	Pools    int // pools (owner and terms) the Runner keeps
	Idle     int // children started, graded by nothing yet, waiting for an execution
	Starting int // children being started ahead of demand
	// Hits counts the executions that took a warm child; Misses those that found their pool
	// empty (and waited for a start under way, or started one of their own).
	Hits, Misses uint64
}

// maxWarmPools bounds the pools a Runner keeps; a new one beyond it evicts the least recently
// used pool that was not prewarmed.
const maxWarmPools = 32

// poolKey is what a warm child was started for. A child is handed only to an execution with
// exactly these terms and this owner: never across tenants.
type poolKey struct {
	owner string
	terms Terms
}

// warmPool is one pool; the Runner's mu guards it.
type warmPool struct {
	idle     []*prepared // oldest first
	starting int
	// waiting are the executions that found the pool empty while starts were under way, in
	// the order they came: each is handed the next child a start makes (nil: start your
	// own). There are never more of them than starts.
	waiting []chan *prepared
	target  int // children to keep idle or starting, from Min to Max
	lastUse time.Time
	pinned  bool // prewarmed: never evicted
}

// startsAtOnce bounds the children started in the background at once: more than the machine
// has cores only makes each start, and the executions running meanwhile, slower.
func startsAtOnce() int { return max(runtime.NumCPU(), 2) }

// warmOn reports whether the Runner keeps warm children at all.
func (r *Runner) warmOn() bool { return r.opts.Warm.Max > 0 }

// pool returns the pool for k, making it (and evicting the least recently used unpinned pool
// when there are too many); nil when none can be made. Called with mu held.
func (r *Runner) pool(k poolKey) *warmPool {
	if p, ok := r.pools[k]; ok {
		return p
	}
	if len(r.pools) >= maxWarmPools {
		var lru poolKey
		var oldest *warmPool
		for key, p := range r.pools {
			if !p.pinned && (oldest == nil || p.lastUse.Before(oldest.lastUse)) {
				lru, oldest = key, p
			}
		}
		if oldest == nil {
			return nil
		}
		delete(r.pools, lru)
		r.discardLater(oldest.idle...)
		oldest.idle, oldest.target = nil, 0 // its starts in flight find it gone and discard
	}
	p := &warmPool{target: r.opts.Warm.Min, lastUse: time.Now()}
	r.pools[k] = p
	return p
}

// takeWarm returns a child started ahead for exactly k, or nil (a miss), and starts the
// children that keep k's pool at its target while the execution runs. A pool found empty,
// or emptied by this take, grows its target: that is demand. An execution that finds it empty
// while its starts are under way waits for the next child one of them makes (docs/design.md
// §19.6): a child of its own, started beside them, would split the cores with them and come
// later than theirs. It waits no longer than ctx; nil then, or when that start failed.
func (r *Runner) takeWarm(ctx context.Context, k poolKey) *prepared {
	if !r.warmOn() {
		return nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	p := r.pool(k)
	if p == nil {
		r.mu.Unlock()
		return nil
	}
	p.lastUse = time.Now()
	var got *prepared
	for len(p.idle) > 0 && got == nil {
		c := p.idle[0]
		p.idle = p.idle[1:]
		if c.dead() {
			r.discardLater(c) // it died waiting (killed from outside, say): never handed out
			continue
		}
		got = c
	}
	var wait chan *prepared
	if got == nil && p.starting > len(p.waiting) {
		wait = make(chan *prepared, 1)
		p.waiting = append(p.waiting, wait)
	}
	w := r.opts.Warm
	switch {
	case got == nil:
		r.misses++
		p.target = min(w.Max, max(2*p.target, w.Min, 1))
	case len(p.idle) == 0:
		r.hits++
		p.target = min(w.Max, p.target+1)
	default:
		r.hits++
	}
	r.refillLocked(k, p)
	r.mu.Unlock()
	if wait == nil {
		return got
	}
	select {
	case c := <-wait:
		if c != nil && c.dead() {
			r.mu.Lock()
			r.discardLater(c)
			r.mu.Unlock()
			return nil
		}
		return c
	case <-ctx.Done():
		r.mu.Lock()
		p.waiting = slices.DeleteFunc(p.waiting, func(c chan *prepared) bool { return c == wait })
		select {
		case c := <-wait: // handed over as ctx ended
			if c != nil {
				r.discardLater(c)
			}
		default:
		}
		r.mu.Unlock()
		return nil
	}
}

// Prewarm starts the warm children of owner's pool for terms t now, rather than at its first
// execution, and keeps that pool (it is never evicted). It does nothing when the Runner keeps
// no warm children.
func (r *Runner) Prewarm(owner string, t Terms) {
	if !r.warmOn() {
		return
	}
	k := poolKey{owner: owner, terms: r.Terms(t)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if p := r.pool(k); p != nil {
		p.pinned = true
		p.target = max(p.target, r.opts.Warm.Min)
		r.refillLocked(k, p)
	}
}

// refillLocked starts, in the background, the children that bring p to its target. Called
// with mu held.
func (r *Runner) refillLocked(k poolKey, p *warmPool) {
	for n := p.target - len(p.idle) - p.starting; n > 0; n-- {
		p.starting++
		r.background.Add(1)
		go r.startWarm(k, p)
	}
}

// startWarm starts one child for pool p (key k) when a start slot is free, and adds it to
// the pool, unless the pool has since shrunk, been evicted, or the Runner closed.
func (r *Runner) startWarm(k poolKey, p *warmPool) {
	defer r.background.Done()
	var c *prepared
	select {
	case r.starts <- struct{}{}:
		c, _ = r.prepare(context.Background(), k.owner, k.terms, true) // a failed start: the next take retries
		<-r.starts
	case <-r.stop:
	}
	r.mu.Lock()
	p.starting--
	live := !r.closed && r.pools[k] == p
	keep := c != nil && live && len(p.idle)+p.starting < p.target
	switch {
	case c != nil && live && len(p.waiting) > 0:
		p.waiting[0] <- c // buffered: never blocks
		p.waiting, c, keep = p.waiting[1:], nil, false
		r.refillLocked(k, p)
	case keep:
		p.idle = append(p.idle, c)
	}
	// Executions beyond the starts still under way (this one failed, or the pool is gone)
	// start their own children.
	for n := len(p.waiting); n > 0 && (n > p.starting || !live); n-- {
		p.waiting[n-1] <- nil
		p.waiting = p.waiting[:n-1]
	}
	r.mu.Unlock()
	if !keep && c != nil {
		c.discard()
	}
}

// discardLater ends children in the background (a discard waits for the child's exit).
// Called with mu held.
func (r *Runner) discardLater(cs ...*prepared) {
	if len(cs) == 0 {
		return
	}
	cs = slices.Clone(cs)
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		for _, c := range cs {
			c.discard()
		}
	}()
}

// tend shrinks the pools unused for the policy's Idle back to Min, every tick until Close.
func (r *Runner) tend() {
	defer r.tending.Done()
	idle := r.opts.Warm.Idle
	t := time.NewTicker(min(max(idle/4, 100*time.Millisecond), 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.mu.Lock()
			for _, p := range r.pools {
				if now.Sub(p.lastUse) < idle || p.target <= r.opts.Warm.Min {
					continue
				}
				p.target = r.opts.Warm.Min
				if extra := len(p.idle) + p.starting - p.target; extra > 0 {
					extra = min(extra, len(p.idle))
					r.discardLater(p.idle[:extra]...) // the oldest go first
					p.idle = p.idle[extra:]
				}
			}
			r.mu.Unlock()
		}
	}
}

// WarmStats returns what the warm pools hold now and how executions have found them.
func (r *Runner) WarmStats() WarmStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := WarmStats{Pools: len(r.pools), Hits: r.hits, Misses: r.misses}
	for _, p := range r.pools {
		s.Idle += len(p.idle)
		s.Starting += p.starting
	}
	return s
}

// WarmIdle returns how many started children wait in the warm pools, all of them: their depth.
func (r *Runner) WarmIdle() int { return r.WarmStats().Idle }

// closePools ends every warm child: the idle ones, and those still starting once they have.
func (r *Runner) closePools() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.stop)
	var idle []*prepared
	for _, p := range r.pools {
		idle = append(idle, p.idle...)
		p.idle = nil
	}
	r.pools = map[poolKey]*warmPool{}
	r.discardLater(idle...)
	if r.pre != nil {
		r.discardPrestarted(r.pre)
		r.pre = nil
	}
	r.mu.Unlock()
	r.tending.Wait()
	r.background.Wait()
}
