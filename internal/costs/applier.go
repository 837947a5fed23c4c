package costs

import (
	"context"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/detached"
)

// applier moves settled reservations to the budget counters in batches
// (PostgreSQL). A settlement completes its ledger row and marks its
// reservation settled without touching the counters; the applier then
// updates each hot counter row once for everything that settled meanwhile,
// so the day's counter row is locked once per batch instead of once per
// call. Until applied, a settled reservation still counts in full as
// reserved, so admission errs on the safe side; if the process dies first,
// the reaper applies it after reservation_ttl.
type applier struct {
	c *Controller

	mu      sync.Mutex
	pending []string
	wake    chan struct{}

	applyMu sync.Mutex // one batch at a time
	cancel  context.CancelFunc
	done    chan struct{}
}

func newApplier(c *Controller) *applier {
	ctx, cancel := context.WithCancel(context.Background())
	ap := &applier{c: c, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go ap.run(ctx)
	return ap
}

func (ap *applier) add(admissionID string) {
	ap.mu.Lock()
	ap.pending = append(ap.pending, admissionID)
	ap.mu.Unlock()
	select {
	case ap.wake <- struct{}{}:
	default:
	}
}

// run applies whatever is pending each time it is woken; while a batch is
// written, the next one gathers.
func (ap *applier) run(ctx context.Context) {
	defer close(ap.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ap.wake:
		}
		if err := ap.flush(detached.Context(ctx)); err != nil {
			ap.c.log.Warn("cost ledger: recording settled calls on the budget counters failed; the reaper records them after costs.reservation_ttl", "err", err)
		}
	}
}

// flush applies everything pending now.
func (ap *applier) flush(ctx context.Context) error {
	ap.applyMu.Lock()
	defer ap.applyMu.Unlock()
	ap.mu.Lock()
	batch := ap.pending
	ap.pending = nil
	ap.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	now := ap.c.now().UTC()
	counters, err := ap.c.store.ApplySettled(ctx, batch, now)
	if err != nil {
		return err
	}
	ap.c.checkAlerts(ctx, ap.c.pol.Load(), counters, now)
	return nil
}

// stop ends the loop after recording what is pending.
func (ap *applier) stop() {
	ap.cancel()
	<-ap.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ap.flush(ctx); err != nil {
		ap.c.log.Warn("cost ledger: recording settled calls at shutdown failed; the reaper records them later", "err", err)
	}
}
