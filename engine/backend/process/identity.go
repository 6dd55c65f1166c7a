package process

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

// identities leases identities: one shared one, or one per execution from a range.
type identities struct {
	shared *Identity
	free   chan Identity
	size   int
}

// parseRunAs reads "uid:gid" or a range "A-B" (each uid with the same-numbered gid).
func parseRunAs(s string) (*identities, error) {
	if a, b, ok := strings.Cut(s, "-"); ok {
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || lo <= 0 || hi < lo {
			return nil, fmt.Errorf("run_as %q: a range is \"FIRST-LAST\" with 0 < FIRST <= LAST", s)
		}
		ids := &identities{free: make(chan Identity, hi-lo+1), size: hi - lo + 1}
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
	return &identities{shared: &Identity{UID: uid, GID: gid}}, nil
}

func (ids *identities) lease(ctx context.Context) (Identity, func(), error) {
	if ids.shared != nil {
		return *ids.shared, func() {}, nil
	}
	select {
	case id := <-ids.free:
		return id, func() { ids.free <- id }, nil
	case <-ctx.Done():
		return Identity{}, nil, fmt.Errorf("all %d sandbox identities are in use: %w", ids.size, ctx.Err())
	}
}
