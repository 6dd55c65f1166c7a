package outputs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// ErrOverQuota is wrapped by a Put's error when the content would take its tenant, or the
// store, past its quota (WithQuota); nothing is stored then. The wrapping error's text says
// which quota and is safe to show the tenant's model: it gives the tenant's own figures and
// never another tenant's.
var ErrOverQuota = errors.New("stored outputs are at their quota")

// StoreQuota bounds what a BlobStore holds. Zero sets no bound.
type StoreQuota struct {
	// Tenant returns the bytes tenant's blobs may occupy (its TenantBytes); nil or 0: no bound.
	Tenant func(tenant string) int64
	// Total is the bytes every tenant's blobs together may occupy.
	Total int64
}

// How old a count of what is stored may be before a Put asks the store again: counting walks a
// tenant's blobs (about 30 ms for 10,000 files on the test machine, ten times a small Put),
// and what other processes sharing the store added in the meantime is the only overshoot it
// allows. This process's own Puts are added as they land.
const (
	tenantRefresh = 2 * time.Second
	totalRefresh  = 10 * time.Second
)

// WithQuota returns s bounded by q. A Put is checked before it stores anything: against what
// its tenant's blobs occupy (TenantBytes, asked again once the count is tenantRefresh old) and
// what every tenant's do (TotalBytes, every totalRefresh), with this process's Puts since then
// added and what its Puts in flight have been promised held back. A Put finding no room left
// is refused with ErrOverQuota; one finding some is given at most that room as its maxBytes,
// so content that would not fit is refused whole (ErrOverQuota), never cut. Within one
// process the quota is exact; processes sharing a store (replicas) can overshoot it by what
// the others stored within a refresh. A Delete frees its blob's bytes at once, for the next
// Put of this process. Everything but Put and Delete is s's own.
func WithQuota(s BlobStore, q StoreQuota) BlobStore {
	if (q.Tenant == nil) && q.Total <= 0 {
		return s
	}
	return &quotaStore{BlobStore: s, q: q, tenants: map[string]*stored{}}
}

type quotaStore struct {
	BlobStore
	q StoreQuota

	mu      sync.Mutex // guards the fields below; never held across a store call
	tenants map[string]*stored
	total   stored
}

// stored is a count of stored bytes: as the store last gave it, plus this process's Puts
// since, and what its Puts in flight have been promised.
type stored struct {
	bytes, promised int64
	at              time.Time // when the store was asked; zero: never

	moved  uint64        // counts every promise and every landing, to see one during an ask
	landed int64         // every byte this process's Puts have added, ever
	asking chan struct{} // non-nil while one Put asks the store; closed when it has answered
}

// count brings c up to date, asking the store (ask) once its count is older than refresh.
//
// One Put asks at a time; the others go on with the count they have, or wait for the first
// answer when there is none yet. The store's answer is exact only if none of this process's
// Puts was in flight or moved while it was asked: a Put that landed in the store before the
// ask read it, and is added here after, would be counted twice; one added here before the
// answer, and landed in the store after the ask read it, would be lost. Such an answer is
// set aside, and this process's own count (exact for what it stored) kept, unless the count
// is older than staleAfter times refresh: then the answer, plus every byte landed during the
// ask, is taken. That can count a Put twice until the next quiet ask, and never lets one
// through that does not fit.
func (s *quotaStore) count(ctx context.Context, c *stored, refresh time.Duration, ask func(context.Context) (int64, error)) error {
	for {
		s.mu.Lock()
		if !c.at.IsZero() && time.Since(c.at) < refresh {
			s.mu.Unlock()
			return nil
		}
		if wait := c.asking; wait != nil {
			have := !c.at.IsZero()
			s.mu.Unlock()
			if have {
				return nil
			}
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return fmt.Errorf("outputs: quota: %w", ctx.Err())
			}
		}
		done := make(chan struct{})
		c.asking = done
		quiet, moved, landed := c.promised == 0, c.moved, c.landed // promised: Puts in flight
		s.mu.Unlock()

		n, err := ask(ctx)

		s.mu.Lock()
		c.asking = nil
		close(done)
		switch {
		case err != nil:
		case quiet && c.moved == moved:
			c.bytes, c.at = n, time.Now()
		case c.at.IsZero() || time.Since(c.at) > staleAfter*refresh:
			c.bytes, c.at = n+(c.landed-landed), time.Now()
		}
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("outputs: quota: %w", err)
		}
		return nil
	}
}

// staleAfter is how many refresh periods a count may go without a quiet ask before a busy
// one is taken (count).
const staleAfter = 5

func (s *quotaStore) Put(ctx context.Context, tenant, name, contentType string, r io.Reader, maxBytes int64) (Handle, int64, error) {
	if err := CheckPut(name, contentType, maxBytes); err != nil {
		return "", 0, err
	}
	var limit int64
	if s.q.Tenant != nil {
		limit = s.q.Tenant(tenant)
	}
	s.mu.Lock()
	t := s.tenants[tenant]
	if t == nil {
		t = &stored{}
		s.tenants[tenant] = t
	}
	s.mu.Unlock()
	if limit > 0 {
		if err := s.count(ctx, t, tenantRefresh, func(ctx context.Context) (int64, error) { return s.BlobStore.TenantBytes(ctx, tenant) }); err != nil {
			return "", 0, err
		}
	}
	if s.q.Total > 0 {
		if err := s.count(ctx, &s.total, totalRefresh, s.BlobStore.TotalBytes); err != nil {
			return "", 0, err
		}
	}
	s.mu.Lock()
	room, why := maxBytes, error(nil)
	if limit > 0 {
		if left := limit - t.bytes - t.promised; left < room {
			room = left
			why = fmt.Errorf("%w: tenant %q keeps %d bytes of outputs, and its quota is %d (max_stored_bytes); older outputs expire with the blob retention",
				ErrOverQuota, tenant, t.bytes, limit)
		}
	}
	if s.q.Total > 0 {
		if left := s.q.Total - s.total.bytes - s.total.promised; left < room {
			room = left
			why = fmt.Errorf("%w: the server's blob store is at its quota for every tenant together (quotas.max_stored_bytes)", ErrOverQuota)
		}
	}
	if room <= 0 {
		s.mu.Unlock()
		return "", 0, why
	}
	for _, c := range []*stored{t, &s.total} {
		c.promised += room
		c.moved++
	}
	s.mu.Unlock()

	h, n, err := s.BlobStore.Put(ctx, tenant, name, contentType, r, room)

	s.mu.Lock()
	for _, c := range []*stored{t, &s.total} {
		c.promised -= room
		c.moved++
		if err == nil {
			c.bytes += n
			c.landed += n
		}
	}
	s.mu.Unlock()
	if errors.Is(err, ErrBlobTooLarge) && room < maxBytes {
		// The content fits what the caller allowed, not what the quota leaves.
		return "", 0, why
	}
	return h, n, err
}

// Delete removes the blob and takes its bytes off the counts, so that a Put right after has
// the room it freed (a task drops its partial outputs just before its output is kept): not
// only at the next refresh. A count asked meanwhile is set aside as a busy one (count).
func (s *quotaStore) Delete(ctx context.Context, tenant string, h Handle) error {
	info, err := s.BlobStore.Stat(ctx, tenant, h)
	if err != nil {
		return err
	}
	if err := s.BlobStore.Delete(ctx, tenant, h); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range []*stored{s.tenants[tenant], &s.total} {
		if c != nil {
			c.bytes = max(c.bytes-info.Size, 0)
			c.moved++
		}
	}
	return nil
}
