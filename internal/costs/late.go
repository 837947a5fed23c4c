package costs

import (
	"context"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/models"
)

// MaxLateSettlements bounds the settlements kept in memory after their
// write failed. Past it a failed settlement is dropped as before: its call
// is priced at its reserved worst case once the reservation lapses (the
// safe side).
const MaxLateSettlements = 4096

// Retry delays of kept settlements: the first retry comes soon (a full disk
// is often freed in seconds), later ones less often.
const (
	lateRetryFirst = time.Second
	lateRetryMax   = 30 * time.Second
)

// lateSettlements keeps the settlements of calls the provider answered but
// whose ledger write failed (a full disk: the gateway answers 507, yet the
// provider served the call and reported its usage). Without them the
// reservation lapses unsettled and the reaper charges the call its
// reserved worst case although the real usage was known. They are retried
// until written: by a retry loop that runs while any is kept, and by every
// reaper pass before it reaps (ReapOnce), so the reaper sees the actual
// usage first. A settlement written after the reaper priced its call still
// wins: it replaces the estimate on the row and the counters (the ledger's
// estimate_admission), so the ledger ends with what was spent either way.
//
// Only memory: a process that dies with settlements kept leaves their calls
// to the reaper's worst case, as before. Settling twice is harmless (the
// ledger settles an admission once).
type lateSettlements struct {
	c *Controller

	mu      sync.Mutex
	kept    []lateSettlement
	running bool // the retry loop is on
	stopped bool
	stop    chan struct{}
	retryMu sync.Mutex // one retry pass at a time
}

type lateSettlement struct {
	st models.Settlement
	a  *admission
}

func newLateSettlements(c *Controller) *lateSettlements {
	return &lateSettlements{c: c, stop: make(chan struct{})}
}

// keep holds a settlement whose write failed; false when the list is full
// or the controller closed.
func (l *lateSettlements) keep(a *admission, st models.Settlement) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || len(l.kept) >= MaxLateSettlements {
		return false
	}
	l.kept = append(l.kept, lateSettlement{st: st, a: a})
	if !l.running {
		l.running = true
		go l.loop()
	}
	return true
}

// Len is how many settlements are kept.
func (l *lateSettlements) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.kept)
}

// loop retries until nothing is kept or the controller closes.
func (l *lateSettlements) loop() {
	wait := lateRetryFirst
	for {
		t := time.NewTimer(wait)
		select {
		case <-l.stop:
			t.Stop()
			return
		case <-t.C:
		}
		left := l.retry(context.Background())
		l.mu.Lock()
		if left == 0 && len(l.kept) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		wait = min(2*wait, lateRetryMax)
	}
}

// retry writes the kept settlements, oldest first, and returns how many are
// still kept. It stops at the first failure (the database still cannot
// take them; the next pass tries again).
func (l *lateSettlements) retry(ctx context.Context) int {
	l.retryMu.Lock()
	defer l.retryMu.Unlock()
	l.mu.Lock()
	batch := append([]lateSettlement(nil), l.kept...)
	l.mu.Unlock()
	done := 0
	for _, k := range batch {
		res, err := l.c.store.SettleCall(detached.Context(ctx), k.st)
		if err != nil {
			break
		}
		done++
		k.a.recordedLate(ctx, res)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// keep appends only: the first done entries are the ones written.
	l.kept = l.kept[done:]
	if done > 0 {
		l.c.log.Info("cost ledger: settlements kept after a failed write are recorded with the usage the provider reported", "count", done, "still_kept", len(l.kept))
	}
	return len(l.kept)
}

// close stops the retry loop; what is still kept is lost to the reaper's
// worst case (logged).
func (l *lateSettlements) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	close(l.stop)
	if n := len(l.kept); n > 0 {
		l.c.log.Error("cost ledger: settlements never written at shutdown; their calls are priced at their reserved worst case after costs.reservation_ttl", "count", n)
	}
}

// RetryLateSettlements writes the settlements kept after a failed write now
// and returns how many are still kept (ReapOnce runs it first).
func (c *Controller) RetryLateSettlements(ctx context.Context) int { return c.late.retry(ctx) }
