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

// totalRefresh is how old the store's total may be before a Put asks the store again: the
// total (every tenant's blobs) is dearer to count than one tenant's, and what other processes
// added in the meantime is the only overshoot it allows.
const totalRefresh = 10 * time.Second

// WithQuota returns s bounded by q. A Put is checked before it stores anything: against its
// tenant's TenantBytes, asked fresh each time, and the store's TotalBytes, asked at most every
// totalRefresh (with this process's own Puts added meanwhile); less what this process's Puts
// in flight have been promised. A tenant with no room left is refused with ErrOverQuota, and a
// Put is given at most the room that is left as its maxBytes, so content that would not fit is
// refused whole (ErrOverQuota), never cut. Within one process the quota is exact; processes
// sharing a store (replicas) can overshoot it by what their Puts in flight at the same moment
// hold. Everything but Put is s's own.
func WithQuota(s BlobStore, q StoreQuota) BlobStore {
	if (q.Tenant == nil) && q.Total <= 0 {
		return s
	}
	return &quotaStore{BlobStore: s, q: q, promised: map[string]int64{}}
}

type quotaStore struct {
	BlobStore
	q StoreQuota

	mu            sync.Mutex       // guards the fields below; never held across a store call
	promised      map[string]int64 // per tenant: bytes promised to Puts in flight
	promisedTotal int64
	total         int64     // the store's TotalBytes as last asked, plus this process's Puts since
	totalAt       time.Time // when it was asked; zero: never
}

func (s *quotaStore) Put(ctx context.Context, tenant, name, contentType string, r io.Reader, maxBytes int64) (Handle, int64, error) {
	if err := CheckPut(name, contentType, maxBytes); err != nil {
		return "", 0, err
	}
	var limit int64
	if s.q.Tenant != nil {
		limit = s.q.Tenant(tenant)
	}
	var used int64
	if limit > 0 {
		n, err := s.BlobStore.TenantBytes(ctx, tenant)
		if err != nil {
			return "", 0, fmt.Errorf("outputs: quota: %w", err)
		}
		used = n
	}
	if err := s.refreshTotal(ctx); err != nil {
		return "", 0, err
	}
	s.mu.Lock()
	room, why := maxBytes, error(nil)
	if limit > 0 {
		left := limit - used - s.promised[tenant]
		if left < room {
			room = left
			why = fmt.Errorf("%w: tenant %q keeps %d bytes of outputs, and its quota is %d (max_stored_bytes); older outputs expire with the blob retention",
				ErrOverQuota, tenant, used, limit)
		}
	}
	if s.q.Total > 0 {
		if left := s.q.Total - s.total - s.promisedTotal; left < room {
			room = left
			why = fmt.Errorf("%w: the server's blob store is at its quota for every tenant together (quotas.max_stored_bytes)", ErrOverQuota)
		}
	}
	if room <= 0 {
		s.mu.Unlock()
		return "", 0, why
	}
	s.promised[tenant] += room
	s.promisedTotal += room
	s.mu.Unlock()

	h, n, err := s.BlobStore.Put(ctx, tenant, name, contentType, r, room)

	s.mu.Lock()
	s.promised[tenant] -= room
	if s.promised[tenant] == 0 {
		delete(s.promised, tenant)
	}
	s.promisedTotal -= room
	if err == nil {
		s.total += n
	}
	s.mu.Unlock()
	if errors.Is(err, ErrBlobTooLarge) && room < maxBytes {
		// The content fits what the caller allowed, not what the quota leaves.
		return "", 0, why
	}
	return h, n, err
}

// refreshTotal asks the store for its total when the one held is older than totalRefresh.
func (s *quotaStore) refreshTotal(ctx context.Context) error {
	if s.q.Total <= 0 {
		return nil
	}
	s.mu.Lock()
	fresh := !s.totalAt.IsZero() && time.Since(s.totalAt) < totalRefresh
	s.mu.Unlock()
	if fresh {
		return nil
	}
	n, err := s.BlobStore.TotalBytes(ctx)
	if err != nil {
		return fmt.Errorf("outputs: quota: %w", err)
	}
	s.mu.Lock()
	s.total, s.totalAt = n, time.Now()
	s.mu.Unlock()
	return nil
}
