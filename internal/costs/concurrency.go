package costs

import (
	"context"
	"sync"
	"time"
)

// slots bounds the calls in flight per provider in this process
// (costs.max_concurrent_per_provider). A call waits for a slot up to
// wait (and its own deadline) before it is refused.
type slots struct {
	mu  sync.Mutex
	per map[string]*semaphore
}

type semaphore struct {
	ch chan struct{}
}

func newSlots() *slots { return &slots{per: map[string]*semaphore{}} }

func (s *slots) sem(provider string, limit int) *semaphore {
	s.mu.Lock()
	defer s.mu.Unlock()
	sem := s.per[provider]
	if sem == nil || cap(sem.ch) != limit {
		// A changed limit gets a fresh semaphore; calls holding slots of the
		// old one release into it harmlessly.
		sem = &semaphore{ch: make(chan struct{}, limit)}
		s.per[provider] = sem
	}
	return sem
}

// acquire takes a slot; the returned func gives it back (call it once).
// limit <= 0 means unbounded. ok is false when no slot freed up in time.
func (s *slots) acquire(ctx context.Context, provider string, limit int, wait time.Duration) (release func(), ok bool) {
	if limit <= 0 {
		return func() {}, true
	}
	sem := s.sem(provider, limit)
	select {
	case sem.ch <- struct{}{}:
		return func() { <-sem.ch }, true
	default:
	}
	if wait <= 0 {
		return nil, false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case sem.ch <- struct{}{}:
		return func() { <-sem.ch }, true
	case <-t.C:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

// inUse is the number of calls in flight on provider.
func (s *slots) inUse(provider string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sem := s.per[provider]; sem != nil {
		return len(sem.ch)
	}
	return 0
}
