package costs

import (
	"context"
	"sync"
	"time"
)

// Limiter keeps rolling windows of amounts per key: requests per minute
// (amount 1 per request), tokens per day, tokens per minute. Every entry is
// kept with its time and member id, so the window is exact (no buckets),
// taking is idempotent per member, and an entry can be corrected after the
// call (reserved tokens -> used tokens) or dropped.
//
// The memory backend serves one process; the Redis backend shares the
// windows between processes. Both implement exactly these semantics (one
// test suite runs against both).
type Limiter interface {
	// Take adds an entry for member to key's window of the given span if the
	// window's total plus the amount stays within limit. It grants as much of
	// want as fits, but at least min (min <= want); otherwise it grants 0 and
	// says when enough will have left the window (at most span). A member
	// already in the window is granted its existing amount again without
	// adding anything.
	Take(ctx context.Context, key, member string, span time.Duration, limit, want, min int64) (granted int64, retryAfter time.Duration, err error)
	// Set changes the amount of member's entry (0 drops it). A member not in
	// the window (expired, never taken) is ignored.
	Set(ctx context.Context, key, member string, span time.Duration, amount int64) error
	// Used is the window's current total.
	Used(ctx context.Context, key string, span time.Duration) (int64, error)
	// Close releases the backend's resources.
	Close() error
}

// memoryLimiter is the one-process backend.
type memoryLimiter struct {
	mu      sync.Mutex
	windows map[string]*window
	now     func() time.Time
}

type window struct {
	span     time.Duration
	entries  []*windowEntry // in time order
	byMember map[string]*windowEntry
	total    int64
}

type windowEntry struct {
	member string
	at     time.Time
	amount int64
	gone   bool
}

// NewMemoryLimiter returns the in-process backend; now is its clock (nil:
// time.Now).
func NewMemoryLimiter(now func() time.Time) Limiter {
	if now == nil {
		now = time.Now
	}
	return &memoryLimiter{windows: map[string]*window{}, now: now}
}

// expire drops entries that left the window; the caller holds mu.
func (m *memoryLimiter) expire(key string, span time.Duration, now time.Time) *window {
	w := m.windows[key]
	if w == nil {
		return nil
	}
	cutoff := now.Add(-span)
	i := 0
	for ; i < len(w.entries) && !w.entries[i].at.After(cutoff); i++ {
		e := w.entries[i]
		if !e.gone {
			w.total -= e.amount
			delete(w.byMember, e.member)
		}
	}
	if i > 0 {
		w.entries = append(w.entries[:0:0], w.entries[i:]...)
	}
	if len(w.byMember) == 0 {
		delete(m.windows, key)
		return nil
	}
	return w
}

func (m *memoryLimiter) Take(_ context.Context, key, member string, span time.Duration, limit, want, min int64) (int64, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	w := m.expire(key, span, now)
	if w == nil {
		w = &window{span: span, byMember: map[string]*windowEntry{}}
	}
	if e, ok := w.byMember[member]; ok {
		return e.amount, 0, nil
	}
	free := limit - w.total
	grant := min64(want, free)
	if grant < min || grant <= 0 {
		need := max64(min, 1) - free
		var freed int64
		for _, e := range w.entries {
			if e.gone {
				continue
			}
			freed += e.amount
			if freed >= need {
				return 0, e.at.Add(span).Sub(now), nil
			}
		}
		return 0, span, nil
	}
	e := &windowEntry{member: member, at: now, amount: grant}
	w.entries = append(w.entries, e)
	w.byMember[member] = e
	w.total += grant
	m.windows[key] = w
	return grant, 0, nil
}

func (m *memoryLimiter) Set(_ context.Context, key, member string, span time.Duration, amount int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.expire(key, span, m.now())
	if w == nil {
		return nil
	}
	e, ok := w.byMember[member]
	if !ok {
		return nil
	}
	if amount <= 0 {
		w.total -= e.amount
		e.gone = true
		delete(w.byMember, member)
		if len(w.byMember) == 0 {
			delete(m.windows, key)
		}
		return nil
	}
	w.total += amount - e.amount
	e.amount = amount
	return nil
}

func (m *memoryLimiter) Used(_ context.Context, key string, span time.Duration) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := m.expire(key, span, m.now()); w != nil {
		return w.total, nil
	}
	return 0, nil
}

func (m *memoryLimiter) Close() error { return nil }

// sweep drops windows nobody touched since all their entries expired, so
// keys of users who went quiet do not accumulate.
func (m *memoryLimiter) sweep() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for key, w := range m.windows {
		m.expire(key, w.span, now)
	}
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
