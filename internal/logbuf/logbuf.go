// Package logbuf keeps the gateway's most recent log lines in memory, so
// that operators can read them (GET /logs) and follow them (GET
// /logs/stream) through the API without shell access to the host.
//
// NewHandler tees a slog.Handler: every record still goes to the wrapped
// handler (stderr or log.file) and is also rendered as one text line into a
// Buffer. Attributes whose key names a secret are redacted in the buffer.
package logbuf

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/agentryhq/agentry/internal/config"
)

// DefaultLines is how many lines a gateway keeps.
const DefaultLines = 1000

// subscriberQueue is how many lines a follower may lag behind before lines
// are dropped for it (a slow client never blocks logging).
const subscriberQueue = 256

// Buffer is a ring of the last N log lines plus the followers of new ones.
// It is an io.Writer: each Write is one line (slog handlers write one record
// per call).
type Buffer struct {
	mu     sync.Mutex
	lines  []string
	next   int
	full   bool
	subs   map[*Subscription]struct{}
	closed bool
}

// New keeps the last n lines (DefaultLines when n <= 0).
func New(n int) *Buffer {
	if n <= 0 {
		n = DefaultLines
	}
	return &Buffer{lines: make([]string, n), subs: map[*Subscription]struct{}{}}
}

// Write records p as one line (a trailing newline is dropped; a multi-line
// write is kept as several lines).
func (b *Buffer) Write(p []byte) (int, error) {
	text := strings.TrimRight(string(p), "\n")
	for _, line := range strings.Split(text, "\n") {
		b.add(line)
	}
	return len(p), nil
}

func (b *Buffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines[b.next] = line
	b.next = (b.next + 1) % len(b.lines)
	if b.next == 0 {
		b.full = true
	}
	for s := range b.subs {
		select {
		case s.ch <- line:
		default:
			s.dropped++
		}
	}
}

// Tail returns up to n of the newest lines, oldest first.
func (b *Buffer) Tail(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tailLocked(n)
}

func (b *Buffer) tailLocked(n int) []string {
	count := b.next
	if b.full {
		count = len(b.lines)
	}
	if n <= 0 || n > count {
		n = count
	}
	out := make([]string, 0, n)
	start := b.next - n
	if start < 0 {
		start += len(b.lines)
	}
	for i := 0; i < n; i++ {
		out = append(out, b.lines[(start+i)%len(b.lines)])
	}
	return out
}

// Subscription receives lines written after it was made.
type Subscription struct {
	ch      chan string
	b       *Buffer
	dropped int
}

// Dropped is how many lines were skipped because the follower lagged.
func (s *Subscription) Dropped() int {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.dropped
}

// Lines delivers new lines; it is closed by Cancel or EndStreams.
func (s *Subscription) Lines() <-chan string { return s.ch }

// Cancel stops the subscription. Safe to call more than once.
func (s *Subscription) Cancel() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.subs[s]; ok {
		delete(s.b.subs, s)
		close(s.ch)
	}
}

// Follow returns the newest n lines and a subscription to the lines after
// them, atomically: no line is missed or repeated between the two. After
// EndStreams it returns a subscription whose channel is already closed.
func (b *Buffer) Follow(n int) ([]string, *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &Subscription{ch: make(chan string, subscriberQueue), b: b}
	if b.closed {
		close(s.ch)
	} else {
		b.subs[s] = struct{}{}
	}
	var tail []string
	if n > 0 {
		tail = b.tailLocked(n)
	}
	return tail, s
}

// EndStreams closes every subscription (and refuses new ones) so that
// following clients finish and a graceful shutdown does not wait on them.
// Lines are still recorded.
func (b *Buffer) EndStreams() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		delete(b.subs, s)
		close(s.ch)
	}
}

// NewHandler returns a handler that passes every record to inner and also
// records it, as a text line with secrets redacted, in buf.
func NewHandler(inner slog.Handler, buf *Buffer) slog.Handler {
	text := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: redactAttr})
	return &tee{inner: inner, text: text}
}

// redactAttr hides values whose key names a secret (api_key, token, ...)
// even if a caller logged one by mistake.
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindGroup && a.Key != slog.MessageKey && config.IsSecretKey(a.Key) && !isCount(a.Key) {
		return slog.String(a.Key, config.Redacted)
	}
	return a
}

// isCount spares token counts (input_tokens, max_tokens), which contain
// "token" but are numbers, not credentials.
func isCount(key string) bool {
	k := strings.ToLower(key)
	return k == "tokens" || strings.HasSuffix(k, "_tokens")
}

type tee struct {
	inner slog.Handler
	text  slog.Handler
}

// Enabled follows the wrapped handler: the buffer keeps what the gateway
// logs at its configured level, no more.
func (t *tee) Enabled(ctx context.Context, l slog.Level) bool { return t.inner.Enabled(ctx, l) }

func (t *tee) Handle(ctx context.Context, r slog.Record) error {
	err := t.inner.Handle(ctx, r.Clone())
	_ = t.text.Handle(ctx, r)
	return err
}

func (t *tee) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &tee{inner: t.inner.WithAttrs(attrs), text: t.text.WithAttrs(attrs)}
}

func (t *tee) WithGroup(name string) slog.Handler {
	return &tee{inner: t.inner.WithGroup(name), text: t.text.WithGroup(name)}
}
