// Package lease runs singleton duties once across a fleet of gateway and
// worker processes that share one application database.
//
// A duty (a sweeper, the reaper, schedule sync, an event hook's cursor) runs
// only in the process that holds its lease: a row of singleton_leases with
// the holder's id, an expiry and an epoch. The holder renews it every TTL/3;
// a process that dies stops renewing and another takes the lease over once
// it has expired (within TTL plus one attempt interval). Every takeover
// raises the epoch, and a renewal names the epoch it holds, so a holder that
// was paused (GC, SIGSTOP, a stalled disk) past its expiry finds its renewal
// refused and stops the duty. It also stops it on its own when its last good
// renewal is older than two thirds of the TTL, without waiting for the
// database to answer, so it has stopped before another can take over.
//
// Fencing is by context: a stopped holder's duty sees its context cancelled.
// A step already under way when that happens can still finish; the duties
// run here are idempotent (workflow-id dedupe, cursors that never move back,
// conditional updates), so such a late step repeats nothing.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentryhq/agentry/models"
)

// DefaultTTL is how long a lease runs without renewal.
const DefaultTTL = 15 * time.Second

// Store is what the elector needs of the database.
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (epoch int64, ok bool, err error)
	RenewLease(ctx context.Context, name, holder string, epoch int64, now time.Time, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string, epoch int64) error
}

var _ Store = models.LeaseStore(nil)

// Elector runs duties under leases for one process.
type Elector struct {
	Store Store
	// Holder names this process in the lease table; default host:pid:random.
	// A holder id that a restarted process reuses takes its leases back at
	// once (SQLite, whose file one process owns: the lease is trivially held).
	Holder string
	// TTL of a lease; default DefaultTTL. Renewals every TTL/3.
	TTL time.Duration
	Log *slog.Logger
	// Now is the clock; default time.Now. Processes' clocks must agree to
	// well under TTL (NTP).
	Now func() time.Time

	once sync.Once
	wg   sync.WaitGroup
	mu   sync.Mutex
	held map[string]bool
}

func (e *Elector) init() {
	if e.Holder == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		e.Holder = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if e.TTL <= 0 {
		e.TTL = DefaultTTL
	}
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	e.held = map[string]bool{}
}

// HolderID is this process's holder id.
func (e *Elector) HolderID() string { e.once.Do(e.init); return e.Holder }

// Holds reports whether this process holds the lease name now.
func (e *Elector) Holds(name string) bool {
	e.once.Do(e.init)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held[name]
}

// Go runs duty under the lease name in the background until ctx ends: duty
// is started with a context that ends when the lease is lost (or ctx ends),
// and started again whenever the lease is won back. Wait waits for them.
func (e *Elector) Go(ctx context.Context, name string, duty func(ctx context.Context)) {
	e.once.Do(e.init)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.run(ctx, name, duty)
	}()
}

// Wait returns once every Go loop has ended (its ctx ended, leases released).
func (e *Elector) Wait() {
	if e != nil {
		e.wg.Wait()
	}
}

func (e *Elector) setHeld(name string, v bool) {
	e.mu.Lock()
	e.held[name] = v
	e.mu.Unlock()
}

func (e *Elector) run(ctx context.Context, name string, duty func(ctx context.Context)) {
	every := e.TTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		epoch, ok, err := e.Store.AcquireLease(ctx, name, e.Holder, e.Now(), e.TTL)
		if err != nil && ctx.Err() == nil {
			e.Log.Warn("lease: acquire failed; retrying", "lease", name, "err", err)
		}
		if ok {
			e.hold(ctx, name, epoch, duty, t)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// hold runs duty while the lease of epoch is renewed.
func (e *Elector) hold(ctx context.Context, name string, epoch int64, duty func(ctx context.Context), t *time.Ticker) {
	e.Log.Info("lease: acquired; running the duty here", "lease", name, "holder", e.Holder, "epoch", epoch)
	e.setHeld(name, true)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		duty(dctx)
	}()
	// The duty stops at two thirds of the TTL after the last good renewal
	// at the latest, a third of the TTL before another process may take
	// the lease over: two duties never overlap by the local clock.
	lastGood := e.Now()
	deadline := func(good time.Time) time.Time { return good.Add(e.TTL * 2 / 3) }
	stop := func(why string) {
		e.setHeld(name, false)
		cancel()
		<-done
		if why != "" {
			e.Log.Warn("lease: lost; duty stopped", "lease", name, "holder", e.Holder, "epoch", epoch, "why", why)
		}
	}
	for {
		select {
		case <-ctx.Done():
			stop("")
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = e.Store.ReleaseLease(rctx, name, e.Holder, epoch)
			rcancel()
			return
		case <-done:
			// The duty returned by itself: give the lease up for another.
			stop("")
			_ = e.Store.ReleaseLease(ctx, name, e.Holder, epoch)
			return
		case <-t.C:
		case <-time.After(time.Until(deadline(lastGood))):
		}
		now := e.Now()
		if !now.Before(deadline(lastGood)) {
			// Paused or cut off: stop before the lease can expire and
			// another holder start the duty.
			stop("no renewal within two thirds of the TTL")
			return
		}
		rctx, rcancel := context.WithDeadline(ctx, deadline(lastGood))
		ok, err := e.Store.RenewLease(rctx, name, e.Holder, epoch, now, e.TTL)
		rcancel()
		switch {
		case err != nil:
			e.Log.Warn("lease: renewal failed; retrying", "lease", name, "err", err)
		case !ok:
			stop("taken over by another holder")
			return
		default:
			lastGood = now
		}
	}
}
