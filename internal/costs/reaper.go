package costs

import (
	"context"
	"time"
)

// reapBatch bounds the reservations released per pass.
const reapBatch = 500

// ReapOnce handles reservations past their expiry (their calls were never
// settled: a process crashed mid-call): each is priced at its reserved worst
// case on the ledger and the counters (never released as unspent). Stale
// pending calls without a reservation are marked expired. Any gateway sharing the database may
// run it; each reservation is released exactly once.
func (c *Controller) ReapOnce(ctx context.Context) (released int, err error) {
	p := c.pol.Load()
	now := c.now().UTC()
	// Settlements kept after a failed write go first: a call whose usage
	// the provider reported is charged that, not its reserved worst case.
	c.late.retry(ctx)
	for {
		n, err := c.store.ReapExpired(ctx, now, reapBatch)
		released += n
		if err != nil {
			return released, err
		}
		if n < reapBatch {
			break
		}
	}
	if _, err := c.store.ExpireStalePending(ctx, now.Add(-p.reservationTTL)); err != nil {
		return released, err
	}
	// Counters of periods long over (a month has at most 31 days).
	if _, err := c.store.PurgeBudgetCounters(ctx, now.AddDate(0, 0, -40)); err != nil {
		return released, err
	}
	if m, ok := c.limiter.(*memoryLimiter); ok {
		m.sweep()
	}
	return released, nil
}

// RunReaper calls ReapOnce periodically until ctx ends: every quarter of
// reservation_ttl, at least every 5 s and at most every minute.
func (c *Controller) RunReaper(ctx context.Context) {
	for {
		every := min(max(c.pol.Load().reservationTTL/4, 5*time.Second), time.Minute)
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if n, err := c.ReapOnce(ctx); err != nil {
			if ctx.Err() == nil {
				c.log.Warn("cost reaper failed", "err", err)
			}
		} else if n > 0 {
			c.log.Warn("cost reaper priced calls never settled at their reserved worst case", "count", n)
		}
		// Attribution changes (a crash leaves unsettled calls) are logged
		// and published here even when nobody asks /health.
		c.CheckAttribution(ctx)
	}
}
