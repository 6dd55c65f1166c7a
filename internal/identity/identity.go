package identity

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Identity is the uid/gid a child runs as, and whether no other execution shares it.
type Identity struct {
	UID, GID  int
	Exclusive bool
}

// Pool leases identities: one shared one, or one per execution from a range.
type Pool struct {
	shared *Identity
	free   chan Identity
	size   int
	first  int // a range's first uid (and gid)
}

// Span is every identity the pool may lease: count consecutive uids from uid, with gids from
// gid (a range's gid is its uid): what a user namespace must map for any of them to run.
func (ids *Pool) Span() (uid, gid, count int) {
	if ids.shared != nil {
		return ids.shared.UID, ids.shared.GID, 1
	}
	return ids.first, ids.first, ids.size
}

// Parse reads "uid:gid" or a range "A-B" (each uid with the same-numbered gid).
func Parse(s string) (*Pool, error) {
	if a, b, ok := strings.Cut(s, "-"); ok {
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || lo <= 0 || hi < lo {
			return nil, fmt.Errorf("run_as %q: a range is \"FIRST-LAST\" with 0 < FIRST <= LAST", s)
		}
		ids := &Pool{free: make(chan Identity, hi-lo+1), size: hi - lo + 1, first: lo}
		for u := lo; u <= hi; u++ {
			ids.free <- Identity{UID: u, GID: u, Exclusive: true}
		}
		return ids, nil
	}
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return nil, fmt.Errorf("run_as %q: want \"UID:GID\" or a range \"FIRST-LAST\"", s)
	}
	return &Pool{shared: &Identity{UID: uid, GID: gid}}, nil
}

// Lease returns an identity and its release; with a range it waits for a free one until ctx
// ends. ahead (a child started before its execution, for a warm pool) never waits, and takes
// one only while more than half the range is free: children kept ready for some tenants and
// terms can then never hold every identity, so an execution that finds no child ready waits
// only for running executions, never for idle children.
func (ids *Pool) Lease(ctx context.Context, ahead bool) (Identity, func(), error) {
	if ids.shared != nil {
		return *ids.shared, func() {}, nil
	}
	if ahead {
		if len(ids.free) <= ids.size/2 {
			return Identity{}, nil, fmt.Errorf("no sandbox identity to spare for a child started ahead (%d of %d free)", len(ids.free), ids.size)
		}
		select {
		case id := <-ids.free:
			return id, func() { ids.free <- id }, nil
		default:
			return Identity{}, nil, fmt.Errorf("no sandbox identity to spare for a child started ahead (all %d in use)", ids.size)
		}
	}
	select {
	case id := <-ids.free:
		return id, func() { ids.free <- id }, nil
	case <-ctx.Done():
		return Identity{}, nil, fmt.Errorf("all %d sandbox identities are in use: %w", ids.size, ctx.Err())
	}
}
