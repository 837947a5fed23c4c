package costs

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/llm"
)

// Breaker states.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// halfOpenRetryAfter is the Retry-After given while a half-open probe runs.
const halfOpenRetryAfter = time.Second

// breakers is the per-provider circuit breaker of this process:
//
//	closed --(circuit_failure_threshold consecutive failures)--> open
//	open --(circuit_cooldown elapsed, next call)--> half_open: that call is the one probe
//	half_open --(probe succeeds)--> closed; --(probe fails)--> open for another cooldown
//
// While open, and while the probe runs, calls are refused without going
// upstream (503 circuit_open with Retry-After). A probe that ends without
// telling anything about the provider (the caller cancelled) frees the
// probe slot for the next call.
type breakers struct {
	mu  sync.Mutex
	per map[string]*breaker
}

type breaker struct {
	state       string
	failures    int
	openUntil   time.Time
	probing     bool
	lastFailure time.Time
	opened      int // times opened, for status
}

// BreakerStatus is one provider's breaker in /costs/status.
type BreakerStatus struct {
	Provider            string     `json:"provider"`
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	OpenUntil           *time.Time `json:"open_until,omitempty"`
	TimesOpened         int        `json:"times_opened"`
}

func newBreakers() *breakers { return &breakers{per: map[string]*breaker{}} }

func (bs *breakers) get(provider string) *breaker {
	b := bs.per[provider]
	if b == nil {
		b = &breaker{state: BreakerClosed}
		bs.per[provider] = b
	}
	return b
}

// allow asks to send a call upstream. probe is true when the call is the
// half-open probe; it must be reported with result (or release).
func (bs *breakers) allow(provider string, now time.Time, threshold int) (probe bool, retryAfter time.Duration, ok bool) {
	if threshold <= 0 {
		return false, 0, true
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.get(provider)
	switch b.state {
	case BreakerOpen:
		if now.Before(b.openUntil) {
			return false, b.openUntil.Sub(now), false
		}
		b.state, b.probing = BreakerHalfOpen, true
		return true, 0, true
	case BreakerHalfOpen:
		if b.probing {
			return false, halfOpenRetryAfter, false
		}
		b.probing = true
		return true, 0, true
	}
	return false, 0, true
}

// peek reports what allow would say, without changing anything.
func (bs *breakers) peek(provider string, now time.Time, threshold int) (retryAfter time.Duration, ok bool) {
	if threshold <= 0 {
		return 0, true
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.per[provider]
	switch {
	case b == nil:
		return 0, true
	case b.state == BreakerOpen && now.Before(b.openUntil):
		return b.openUntil.Sub(now), false
	case b.state == BreakerHalfOpen && b.probing:
		return halfOpenRetryAfter, false
	}
	return 0, true
}

type callResult int

const (
	resultNeutral callResult = iota // nothing learned (caller cancelled)
	resultSuccess
	resultFailure
)

// record reports the end of a call (or a failed attempt before a retry).
func (bs *breakers) record(provider string, probe bool, r callResult, now time.Time, threshold int, cooldown time.Duration) {
	if threshold <= 0 {
		return
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.get(provider)
	switch r {
	case resultSuccess:
		if b.state == BreakerOpen && !probe {
			// A call admitted before the breaker opened answered: the
			// provider works, but let the cooldown run its course.
			return
		}
		b.state, b.failures, b.probing = BreakerClosed, 0, false
	case resultFailure:
		b.lastFailure = now
		if probe || b.state == BreakerHalfOpen {
			if probe {
				b.probing = false
			}
			b.open(now, cooldown)
			return
		}
		if b.state == BreakerOpen {
			return
		}
		b.failures++
		if b.failures >= threshold {
			b.open(now, cooldown)
		}
	case resultNeutral:
		if probe {
			b.probing = false
		}
	}
}

func (b *breaker) open(now time.Time, cooldown time.Duration) {
	b.state, b.openUntil, b.probing = BreakerOpen, now.Add(cooldown), false
	b.opened++
}

// release frees a probe slot of a call that was admitted by the breaker but
// then refused by a later admission step.
func (bs *breakers) release(provider string, probe bool) {
	if !probe {
		return
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.get(provider).probing = false
}

func (bs *breakers) status(now time.Time) []BreakerStatus {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	out := make([]BreakerStatus, 0, len(bs.per))
	for id, b := range bs.per {
		st := BreakerStatus{Provider: id, State: b.state, ConsecutiveFailures: b.failures, TimesOpened: b.opened}
		if b.state == BreakerOpen {
			if now.Before(b.openUntil) {
				t := b.openUntil
				st.OpenUntil = &t
			} else {
				st.State = BreakerHalfOpen // the next call probes
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out
}

// classify tells what a call's error says about the provider: server
// errors, rate limiting, timeouts and broken connections are failures; an
// answer with a client error (4xx other than 408/429) shows the provider
// works; the caller's cancellation and errors of the stream's consumer say
// nothing.
func classify(err error) callResult {
	if err == nil {
		return resultSuccess
	}
	if errors.Is(err, context.Canceled) {
		return resultNeutral
	}
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		return resultNeutral
	}
	switch {
	case pe.StatusCode == 0, pe.StatusCode == 408, pe.StatusCode == 429, pe.StatusCode >= 500:
		return resultFailure
	}
	return resultSuccess
}
