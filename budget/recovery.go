package budget

import (
	"context"
	"slices"
	"time"
)

// RunRecovery calls l.Recover now and then every interval until ctx ends, handing each pass's
// result to report (which may be nil): the calls it recorded unknown, or its error. A Ledger
// shared by several processes needs this beyond startup, because an owner may die at any
// time while the others live on; whichever survivor looks first records that owner's calls,
// once. The caller owns the goroutine it runs on.
func RunRecovery(ctx context.Context, l Ledger, interval time.Duration, report func([]CallRecord, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		lost, err := l.Recover(ctx)
		if ctx.Err() != nil {
			err = nil // the pass was cut short by the end of the watch, not by a fault
		}
		if report != nil && (len(lost) > 0 || err != nil) {
			report(lost, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SortByStart orders recovered calls as they were started: the order Recover returns.
func SortByStart(cs []CallRecord) {
	slices.SortStableFunc(cs, func(a, b CallRecord) int { return a.StartedAt.Compare(b.StartedAt) })
}
