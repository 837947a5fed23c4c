package sweeper

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// The first pass covers records up to now minus startGrace (0: every
// record; a shared database: only those older than the grace).
func TestFirstPassHonoursStartGrace(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	for _, grace := range []time.Duration{0, 2 * time.Minute} {
		ctx, cancel := context.WithCancel(context.Background())
		var got time.Time
		Run(ctx, slog.New(slog.DiscardHandler), "test sweep", "repaired", time.Hour, grace, time.Minute,
			func() time.Time { return now },
			func(_ context.Context, before time.Time) (int, error) {
				got = before
				cancel() // one pass is enough: Run returns at its next select
				return 0, nil
			})
		if want := now.Add(-grace); !got.Equal(want) {
			t.Errorf("start grace %s: first pass before %s, want %s", grace, got, want)
		}
	}
}
