package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// MaxRetryAfter is the longest provider Retry-After the gateway honours (spec, cost rule 11); the
// request deadline bounds it further.
const MaxRetryAfter = 30 * time.Second

// RetryPolicy says how transient provider failures (429, 408, 5xx, overloaded, network errors before
// an answer) are repeated. Retries happen in one place, the WithRetry wrapper; clients never retry.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts including the first; <= 1 disables retries.
	MaxAttempts int
	// BaseDelay is the backoff before the first retry when the provider gave no Retry-After; it
	// doubles with each retry (with jitter). Default 500 ms.
	BaseDelay time.Duration
	// MaxDelay caps that exponential backoff. Default 8 s.
	MaxDelay time.Duration
	// MaxRetryAfter caps a provider's Retry-After. Default (and upper bound) MaxRetryAfter.
	MaxRetryAfter time.Duration
	// OnRetry, if set, is called before every retry with the number of the attempt about to start
	// (2 for the first retry) and the error of the attempt before. Per-call observers are attached
	// with WithRetryObserver (the Router does that for the cost ledger).
	OnRetry func(attempt int, err error)

	// sleep waits between attempts; tests replace it to avoid real waits.
	sleep func(ctx context.Context, d time.Duration) error
}

// DefaultRetryPolicy is 3 attempts, 500 ms doubling backoff up to 8 s, Retry-After up to 30 s.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 3, BaseDelay: 500 * time.Millisecond, MaxDelay: 8 * time.Second, MaxRetryAfter: MaxRetryAfter}
}

// RetryPolicyFromMaxRetries maps ProviderConfig.MaxRetries: 0 is the default policy, a negative value
// disables retries, n > 0 allows n retries.
func RetryPolicyFromMaxRetries(n int) RetryPolicy {
	p := DefaultRetryPolicy()
	switch {
	case n < 0:
		p.MaxAttempts = 1
	case n > 0:
		p.MaxAttempts = n + 1
	}
	return p
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.BaseDelay <= 0 {
		p.BaseDelay = d.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = d.MaxDelay
	}
	if p.MaxRetryAfter <= 0 || p.MaxRetryAfter > MaxRetryAfter {
		p.MaxRetryAfter = MaxRetryAfter
	}
	if p.sleep == nil {
		p.sleep = sleepCtx
	}
	return p
}

// Delay is the wait before retry number retry (1 for the first retry) after err: the provider's
// Retry-After capped at MaxRetryAfter when it sent one, otherwise exponential backoff with jitter
// (between half and all of BaseDelay*2^(retry-1), capped at MaxDelay).
func (p RetryPolicy) Delay(retry int, err error) time.Duration {
	p = p.withDefaults()
	var pe *ProviderError
	if errors.As(err, &pe) && pe.RetryAfter > 0 {
		return min(pe.RetryAfter, p.MaxRetryAfter)
	}
	if retry < 1 {
		retry = 1
	}
	d := p.BaseDelay
	for i := 1; i < retry && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	half := d / 2
	return half + rand.N(half+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type retryObserverKey struct{}

type noRetryKey struct{}

// WithoutRetries returns a context whose calls through a WithRetry provider make exactly one
// attempt. Temporal activities use it: there the activity's retry policy is the one retry owner
// (a provider's Retry-After becomes the activity error's next-retry delay, see RetryDelay), so a
// client loop inside the activity would only multiply attempts and hold the worker slot.
func WithoutRetries(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRetryKey{}, true)
}

// RetriesDisabled reports whether ctx came from WithoutRetries.
func RetriesDisabled(ctx context.Context) bool {
	off, _ := ctx.Value(noRetryKey{}).(bool)
	return off
}

// RetryAfter is the wait a provider asked for before repeating the call that failed with err,
// capped at MaxRetryAfter; 0 when err carries none.
func RetryAfter(err error) time.Duration {
	var pe *ProviderError
	if errors.As(err, &pe) && pe.RetryAfter > 0 {
		return min(pe.RetryAfter, MaxRetryAfter)
	}
	return 0
}

// WithRetryObserver returns a context whose calls through a WithRetry provider report each retry to
// fn (attempt about to start, error of the previous one), in addition to RetryPolicy.OnRetry. The
// Router uses it so the cost ledger counts retries on the row of the call they belong to.
func WithRetryObserver(ctx context.Context, fn func(attempt int, err error)) context.Context {
	if fn == nil {
		return ctx
	}
	if prev, ok := ctx.Value(retryObserverKey{}).(func(int, error)); ok {
		next := fn
		fn = func(a int, err error) { prev(a, err); next(a, err) }
	}
	return context.WithValue(ctx, retryObserverKey{}, fn)
}

// WithRetry wraps p so that transient failures are repeated by policy. Wrapping an already wrapped
// provider replaces its policy instead of nesting retries.
func WithRetry(p Provider, policy RetryPolicy) Provider {
	if rp, ok := p.(*retryProvider); ok {
		p = rp.inner
	}
	return &retryProvider{inner: p, policy: policy.withDefaults()}
}

type retryProvider struct {
	inner  Provider
	policy RetryPolicy
}

func (r *retryProvider) ID() string      { return r.inner.ID() }
func (r *retryProvider) Address() string { return r.inner.Address() }

// Unwrap returns the wrapped client.
func (r *retryProvider) Unwrap() Provider { return r.inner }

func (r *retryProvider) Chat(ctx context.Context, req Request) (*Response, error) {
	return r.run(ctx, func(ctx context.Context) (*Response, error) { return r.inner.Chat(ctx, req) }, nil)
}

// Stream is retried only while no content reached onDelta: once the caller has seen text, a repeat
// would show it twice.
func (r *retryProvider) Stream(ctx context.Context, req Request, onDelta func(string) error) (*Response, error) {
	var delivered atomic.Bool
	wrapped := func(s string) error {
		delivered.Store(true)
		if onDelta == nil {
			return nil
		}
		return onDelta(s)
	}
	return r.run(ctx, func(ctx context.Context) (*Response, error) { return r.inner.Stream(ctx, req, wrapped) }, &delivered)
}

func (r *retryProvider) run(ctx context.Context, attempt func(context.Context) (*Response, error), delivered *atomic.Bool) (*Response, error) {
	max := max(r.policy.MaxAttempts, 1)
	if RetriesDisabled(ctx) {
		max = 1
	}
	observer, _ := ctx.Value(retryObserverKey{}).(func(int, error))
	for n := 1; ; n++ {
		resp, err := attempt(ctx)
		if resp != nil {
			resp.Attempts = n
		}
		if err == nil {
			return resp, nil
		}
		if n >= max || !IsRetryable(err) || ctx.Err() != nil || (delivered != nil && delivered.Load()) {
			return resp, attemptsError(err, n)
		}
		wait := r.policy.Delay(n, err)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return resp, fmt.Errorf("%w (not retried: waiting %s would pass the request deadline)", attemptsError(err, n), wait.Round(time.Millisecond))
		}
		if serr := r.policy.sleep(ctx, wait); serr != nil {
			return resp, errors.Join(attemptsError(err, n), serr)
		}
		if r.policy.OnRetry != nil {
			r.policy.OnRetry(n+1, err)
		}
		if observer != nil {
			observer(n+1, err)
		}
	}
}

func attemptsError(err error, n int) error {
	if n <= 1 {
		return err
	}
	return fmt.Errorf("%w (after %d attempts)", err, n)
}
