// Package events is Agentry's event stream: events are appended to the
// events table (models.Event) and handed to subscribers in id order.
//
// The table is the source of truth. Publishing inserts a row (a dedupe key
// makes a repeated occurrence a no-op) and wakes the subscribers of this
// process; a subscriber reads the table from its last id whenever it is
// woken and, at the latest, every PollInterval, so events written by other
// processes (a worker running apart from the API, a second gateway on the
// same PostgreSQL) reach it too. Resuming from an id (SSE Last-Event-ID)
// is the same read.
package events

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentryhq/agentry/models"
)

// Defaults of a Bus.
const (
	// DefaultPollInterval bounds how late an event written by another
	// process is seen.
	DefaultPollInterval = 500 * time.Millisecond
	// batchSize is how many events one read returns.
	batchSize = 500
	// subscriberBuffer is how many events a subscription holds for a slow
	// reader before the reader's pace slows the reads.
	subscriberBuffer = 64
)

// Filter selects the events of a subscription; see models.EventFilter.
type Filter = models.EventFilter

// Bus publishes and fans out events. It is safe for concurrent use.
type Bus struct {
	store models.EventStore
	log   *slog.Logger
	// PollInterval is how often subscribers look for events of other
	// processes; set it before the first Subscribe.
	PollInterval time.Duration

	mu   sync.Mutex
	wake chan struct{} // closed and replaced by Notify
}

// New returns a bus over the store's events table.
func New(store models.EventStore, log *slog.Logger) *Bus {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Bus{store: store, log: log, PollInterval: DefaultPollInterval, wake: make(chan struct{})}
}

// Publish appends ev unless an event with its dedupe key exists, then
// wakes the subscribers. It reports whether the event was new; ev.ID is set
// when it was.
func (b *Bus) Publish(ctx context.Context, ev *models.Event) (bool, error) {
	inserted, err := b.store.InsertEvent(ctx, ev)
	if err != nil {
		return false, err
	}
	if inserted {
		b.Notify()
	}
	return inserted, nil
}

// Notify wakes the subscribers of this process. Store methods that write
// events inside their own transaction (the workboard's) call it after
// committing; without it subscribers still see the events at their next
// poll.
func (b *Bus) Notify() {
	b.mu.Lock()
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

func (b *Bus) wakeChan() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wake
}

// LastID is the id of the newest event (0 when there is none).
func (b *Bus) LastID(ctx context.Context) (int64, error) { return b.store.LastEventID(ctx) }

// Subscribe delivers the events after id `after` that pass f, in id order,
// until ctx ends; then the channel is closed. A negative after starts at
// the current end of the stream (only new events). Reads that fail are
// logged and retried at the next poll.
func (b *Bus) Subscribe(ctx context.Context, f Filter, after int64) (<-chan models.Event, error) {
	if after < 0 {
		last, err := b.store.LastEventID(ctx)
		if err != nil {
			return nil, err
		}
		after = last
	}
	out := make(chan models.Event, subscriberBuffer)
	go b.tail(ctx, f, after, out)
	return out, nil
}

func (b *Bus) tail(ctx context.Context, f Filter, cursor int64, out chan<- models.Event) {
	defer close(out)
	poll := b.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		// Take the wake channel before reading, so an event committed
		// after the read wakes the wait below.
		wake := b.wakeChan()
		evs, err := b.store.EventsAfter(ctx, cursor, f, batchSize)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.log.Warn("event stream: read failed; retrying", "after", cursor, "err", err)
		}
		for _, ev := range evs {
			select {
			case out <- ev:
				cursor = ev.ID
			case <-ctx.Done():
				return
			}
		}
		if len(evs) == batchSize {
			continue // more are waiting
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
	}
}
