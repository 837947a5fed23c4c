// Package sweeper runs the repair passes of records that promise a
// workflow (a delivery's outbox entry, a queued task run): once at start,
// over every record (no request of the new process is starting one; see
// Run for databases shared by several gateways), then
// on a timer over the records older than a grace period (younger ones
// belong to the request that is starting them).
package sweeper

import (
	"context"
	"log/slog"
	"time"
)

// Pass repairs the records created before `before` and says how many.
type Pass func(ctx context.Context, before time.Time) (int, error)

// Run calls pass at once with now() - startGrace and then every `every`
// with now() - grace, until ctx ends. startGrace is 0 where this process is
// the only one creating such records (nothing of another process can be
// mid-start), and the grace period where other gateways share the database. Errors are logged as warnings under what; repairs
// as info with done.
func Run(ctx context.Context, log *slog.Logger, what, done string, every, startGrace, grace time.Duration, now func() time.Time, pass Pass) {
	sweep := func(before time.Time) {
		n, err := pass(ctx, before)
		if err != nil && ctx.Err() == nil {
			log.Warn(what, "err", err)
		}
		if n > 0 {
			log.Info(done, "count", n)
		}
	}
	sweep(now().Add(-startGrace))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sweep(now().Add(-grace))
		}
	}
}
