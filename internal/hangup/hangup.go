// Package hangup notices when an HTTP client has gone away while its request
// is still being worked on. fasthttp (under Fiber) reads nothing from a
// connection while a handler runs and offers no close notification, so a
// caller that disconnects would otherwise leave its provider call running to
// the end, billed and added to the conversation although nobody sees it.
//
// A Watcher checks the connections of the requests registered with it a few
// times a second, without consuming a byte: it peeks (MSG_PEEK) at the
// socket, and an orderly end of stream (the client closed) or a reset
// cancels the request's context. Data waiting on the socket (a pipelined
// next request) means the client is still there. One goroutine serves every
// request and runs only while some are registered.
//
// Limits: TLS connections are not watched (a closing TLS client sends an
// alert record first, which a peek cannot tell from data); on systems other
// than Linux nothing is watched. Writes still notice a gone client where a
// handler streams.
package hangup

import (
	"context"
	"net"
	"sync"
	"time"
)

// DefaultInterval is how often registered connections are checked.
const DefaultInterval = 50 * time.Millisecond

// Watcher cancels the contexts of requests whose client hung up.
type Watcher struct {
	interval time.Duration

	mu      sync.Mutex
	watched map[*entry]struct{}
	running bool
}

type entry struct {
	conn   net.Conn
	cancel context.CancelCauseFunc
}

// New returns a watcher checking every interval (0: DefaultInterval).
func New(interval time.Duration) *Watcher {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Watcher{interval: interval, watched: map[*entry]struct{}{}}
}

// ErrClientGone is the cause of a context cancelled because the client
// disconnected.
var ErrClientGone = context.Canceled

// Watch returns a context derived from ctx that is cancelled when the client
// on conn disconnects, and a stop function to call when the request is done
// (it releases the watch and cancels the context). A connection that cannot
// be watched gives a plain cancellable context.
func (w *Watcher) Watch(ctx context.Context, conn net.Conn) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if w == nil || !watchable(conn) {
		return ctx, func() { cancel(nil) }
	}
	// The connection is looked at (peek) only by the watcher's loop, so a
	// request over before the next tick, the usual one, pays for no more
	// than its entry.
	e := &entry{conn: conn, cancel: cancel}
	w.mu.Lock()
	w.watched[e] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
	return ctx, func() {
		w.mu.Lock()
		delete(w.watched, e)
		w.mu.Unlock()
		cancel(nil)
	}
}

// state is what a peek at a connection found.
type state int

const (
	alive state = iota
	gone
)

func (w *Watcher) loop() {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	var batch []*entry
	for range t.C {
		w.mu.Lock()
		if len(w.watched) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		batch = batch[:0]
		for e := range w.watched {
			batch = append(batch, e)
		}
		w.mu.Unlock()
		for _, e := range batch {
			if peek(e.conn) == gone {
				e.cancel(ErrClientGone)
			}
		}
	}
}
