package lease_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/lease"
	"github.com/agentryhq/agentry/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// stores opens two stores on one database, as two processes would.
func stores(t *testing.T, postgres bool) (*models.Store, *models.Store) {
	t.Helper()
	opts := models.Options{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "agentry.db")}
	if postgres {
		opts = models.Options{Driver: models.DriverPostgres, DSN: testenv.Postgres(t)}
	}
	open := func() *models.Store {
		st, err := models.Open(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a := open()
	if postgres {
		return a, open()
	}
	return a, a // SQLite: one process owns the file; the lease is trivially held
}

// gatedStore can be cut off from the database (a crashed or paused process).
type gatedStore struct {
	lease.Store
	cut atomic.Bool
}

func (g *gatedStore) RenewLease(ctx context.Context, name, holder string, epoch int64, now time.Time, ttl time.Duration) (bool, error) {
	if g.cut.Load() {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return g.Store.RenewLease(ctx, name, holder, epoch, now, ttl)
}

func (g *gatedStore) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (int64, bool, error) {
	if g.cut.Load() {
		return 0, false, context.Canceled
	}
	return g.Store.AcquireLease(ctx, name, holder, now, ttl)
}

// duty counts how many holders run it at once, and who ran it.
type duty struct {
	mu      sync.Mutex
	running int
	maxRun  int
	by      map[string]int
}

func (d *duty) run(holder string) func(ctx context.Context) {
	return func(ctx context.Context) {
		d.mu.Lock()
		d.running++
		d.maxRun = max(d.maxRun, d.running)
		if d.by == nil {
			d.by = map[string]int{}
		}
		d.by[holder]++
		d.mu.Unlock()
		<-ctx.Done()
		d.mu.Lock()
		d.running--
		d.mu.Unlock()
	}
}

func (d *duty) snapshot() (running, maxRun int, by map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cp := map[string]int{}
	for k, v := range d.by {
		cp[k] = v
	}
	return d.running, d.maxRun, cp
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two processes run one duty: it runs in exactly one; when its holder dies
// (stops renewing, releases nothing) the other takes it over after the TTL,
// and the dead holder's duty was stopped before the takeover could run it
// twice (its own TTL check, as a paused process would).
func TestDutyRunsOnceAndIsTakenOverWhenItsHolderDies(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[pg]
		t.Run(name, func(t *testing.T) {
			a, b := stores(t, pg)
			ga, gb := &gatedStore{Store: a}, &gatedStore{Store: b}
			const ttl = 600 * time.Millisecond
			ea := &lease.Elector{Store: ga, Holder: "A", TTL: ttl}
			eb := &lease.Elector{Store: gb, Holder: "B", TTL: ttl}
			var d duty
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); ea.Wait(); eb.Wait() }()
			ea.Go(ctx, "sweeper", d.run("A"))
			waitFor(t, "A to hold the lease", func() bool { return ea.Holds("sweeper") })
			eb.Go(ctx, "sweeper", d.run("B"))
			time.Sleep(3 * ttl)
			if running, maxRun, by := d.snapshot(); running != 1 || maxRun != 1 || by["B"] != 0 {
				t.Fatalf("with A alive: running=%d max=%d by=%v, want only A", running, maxRun, by)
			}

			ga.cut.Store(true) // A dies: no renewal, no release
			waitFor(t, "B to take over", func() bool { return eb.Holds("sweeper") })
			if ea.Holds("sweeper") {
				t.Fatal("A still believes it holds the lease after B took it over")
			}
			_, maxRun, by := d.snapshot()
			if maxRun != 1 || by["B"] != 1 {
				t.Fatalf("after the takeover: max=%d by=%v, want one at a time, B once", maxRun, by)
			}
			l, err := a.GetLease(context.Background(), "sweeper")
			if err != nil || l == nil || l.Holder != "B" || l.Epoch < 2 {
				t.Fatalf("lease row = %+v, %v; want held by B at a raised epoch", l, err)
			}
		})
	}
}

// A holder that comes back after its lease was taken over (a paused
// process) cannot renew it: the epoch moved on.
func TestStaleHolderIsFenced(t *testing.T) {
	a, _ := stores(t, false)
	ctx := context.Background()
	now := time.Now()
	e1, ok, err := a.AcquireLease(ctx, "hooks", "A", now, time.Second)
	if err != nil || !ok {
		t.Fatalf("A acquire: %v %v", ok, err)
	}
	if _, ok, _ := a.AcquireLease(ctx, "hooks", "B", now.Add(500*time.Millisecond), time.Second); ok {
		t.Fatal("B took a running lease")
	}
	e2, ok, err := a.AcquireLease(ctx, "hooks", "B", now.Add(2*time.Second), time.Second)
	if err != nil || !ok || e2 <= e1 {
		t.Fatalf("B takeover after expiry: epoch %d ok %v err %v", e2, ok, err)
	}
	if ok, _ := a.RenewLease(ctx, "hooks", "A", e1, now.Add(2*time.Second), time.Second); ok {
		t.Fatal("A renewed a lease B had taken over")
	}
	if err := a.ReleaseLease(ctx, "hooks", "A", e1); err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.RenewLease(ctx, "hooks", "B", e2, now.Add(2500*time.Millisecond), time.Second); !ok {
		t.Fatal("A's stale release ended B's lease")
	}
}

// A clean shutdown releases the lease so another process takes it at once.
func TestShutdownReleases(t *testing.T) {
	a, b := stores(t, false)
	ea := &lease.Elector{Store: a, Holder: "A", TTL: time.Hour}
	eb := &lease.Elector{Store: b, Holder: "B", TTL: 300 * time.Millisecond}
	var d duty
	actx, acancel := context.WithCancel(context.Background())
	ea.Go(actx, "reaper", d.run("A"))
	waitFor(t, "A", func() bool { return ea.Holds("reaper") })
	bctx, bcancel := context.WithCancel(context.Background())
	defer func() { bcancel(); eb.Wait() }()
	eb.Go(bctx, "reaper", d.run("B"))
	acancel()
	ea.Wait()
	waitFor(t, "B after A's release (not after A's hour-long TTL)", func() bool { return eb.Holds("reaper") })
}

// A restarted process with a stable holder id (SQLite) takes its lease back
// at once, though the crashed one released nothing.
func TestStableHolderTakesItsLeaseBackAtOnce(t *testing.T) {
	a, _ := stores(t, false)
	ctx := context.Background()
	if _, ok, _ := a.AcquireLease(ctx, "schedule-sync", "local", time.Now(), time.Hour); !ok {
		t.Fatal("first acquire")
	}
	e2, ok, err := a.AcquireLease(ctx, "schedule-sync", "local", time.Now(), time.Hour)
	if err != nil || !ok || e2 != 2 {
		t.Fatalf("re-acquire by the same holder: epoch %d ok %v err %v", e2, ok, err)
	}
}
