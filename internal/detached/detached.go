// Package detached is context.WithoutCancel without its cost on every
// lookup. The standard library's detached context is a value type, and each
// ctx.Value that passes through it boxes it into a Context again: one heap
// allocation per lookup. A chat request looks values up through detached
// contexts about ten times (its principal, its held writes, its trace span),
// on the hot path of every request; this one is a pointer and allocates
// only when it is made.
package detached

import (
	"context"
	"time"
)

// Context returns a context that keeps parent's values but is never
// canceled and has no deadline, as context.WithoutCancel does:
// context.Cause of it, and of values added on top of it, is nil.
func Context(parent context.Context) context.Context {
	if parent == nil {
		panic("detached: nil parent context")
	}
	if d, ok := parent.(*detachedCtx); ok {
		return d
	}
	return &detachedCtx{parent: parent}
}

type detachedCtx struct{ parent context.Context }

func (*detachedCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*detachedCtx) Done() <-chan struct{}       { return nil }
func (*detachedCtx) Err() error                  { return nil }

func (c *detachedCtx) Value(key any) any {
	if cancelKey != nil && key == cancelKey {
		// The key a canceled context answers with itself: the parent's
		// cancellation is not this context's (see probeCancelKey).
		return nil
	}
	return c.parent.Value(key)
}

func (c *detachedCtx) String() string { return "detached" }

// cancelKey is the unexported key through which the context package finds
// the nearest cancelable ancestor (context.Cause, context.AfterFunc,
// WithCancel's propagation); context.WithoutCancel answers it with nil, and
// so does this context.
var cancelKey = probeCancelKey()

// probeCancelKey learns that key from context.Cause, which asks a canceled
// context for it. nil if Cause ever stops asking (then no caller needs it).
func probeCancelKey() any {
	p := &keyProbe{Context: context.Background()}
	_ = context.Cause(p)
	return p.key
}

type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Err() error { return context.Canceled }

func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}
