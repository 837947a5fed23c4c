package detached

import (
	"context"
	"errors"
	"testing"
	"time"
)

type key struct{}

func TestDetachedKeepsValuesAndDropsCancellation(t *testing.T) {
	cause := errors.New("client went away")
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, "principal"))
	parent, stop := context.WithTimeout(parent, time.Hour)
	defer stop()
	d := Context(parent)
	cancel(cause)

	if got := d.Value(key{}); got != "principal" {
		t.Fatalf("Value = %v, want the parent's value", got)
	}
	if d.Done() != nil || d.Err() != nil {
		t.Fatalf("Done %v, Err %v: want a context that is never canceled", d.Done(), d.Err())
	}
	if _, ok := d.Deadline(); ok {
		t.Fatal("the parent's deadline was kept")
	}
	if got := context.Cause(d); got != nil {
		t.Fatalf("Cause = %v, want nil as for context.WithoutCancel", got)
	}
	// A context derived from it knows nothing of the parent's cancellation
	// either, and its own cancellation is its own.
	withValue := context.WithValue(d, key{}, "other")
	if got := context.Cause(withValue); got != nil {
		t.Fatalf("Cause of a value on top = %v, want nil", got)
	}
	child, cancelChild := context.WithCancelCause(d)
	if child.Err() != nil {
		t.Fatal("a child of a detached context was canceled with the parent")
	}
	own := errors.New("own")
	cancelChild(own)
	if got := context.Cause(child); got != own {
		t.Fatalf("Cause of a canceled child = %v, want its own cause", got)
	}
	stopped := make(chan struct{})
	context.AfterFunc(d, func() { close(stopped) })
	select {
	case <-stopped:
		t.Fatal("AfterFunc ran for a context that is never canceled")
	case <-time.After(20 * time.Millisecond):
	}
}

func TestDetachedKnowsTheCancelKey(t *testing.T) {
	if cancelKey == nil {
		t.Fatal("context.Cause no longer asks for the cancel key: check what WithoutCancel answers now")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if ctx.Value(cancelKey) != ctx {
		t.Fatal("the probed key is not the one a cancelable context answers with itself")
	}
	if Context(ctx).Value(cancelKey) != nil {
		t.Fatal("a detached context gives its parent away as its cancelable ancestor")
	}
}

func TestDetachedLookupsDoNotAllocate(t *testing.T) {
	base := context.WithValue(context.Background(), key{}, 1)
	d := context.WithValue(Context(base), struct{ k int }{1}, 2)
	if n := testing.AllocsPerRun(100, func() { _ = d.Value(key{}) }); n != 0 {
		t.Fatalf("a lookup through a detached context allocated %v times", n)
	}
	std := context.WithValue(context.WithoutCancel(base), struct{ k int }{1}, 2)
	if n := testing.AllocsPerRun(100, func() { _ = std.Value(key{}) }); n == 0 {
		t.Log("context.WithoutCancel no longer allocates per lookup: this package may go")
	}
}

func TestDetachingTwiceIsOneLayer(t *testing.T) {
	d := Context(context.Background())
	if Context(d) != d {
		t.Fatal("a detached context was wrapped again")
	}
}
