package chat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// Chats of one session never overlap, and no entry outlives its chats.
func TestSessionLocksSerialiseAndForget(t *testing.T) {
	var locks sessionLocks
	inside := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("s%d", i%7)
			unlock, err := locks.lock(context.Background(), id)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside[id]++
			if inside[id] != 1 {
				t.Errorf("two chats of session %s at once", id)
			}
			mu.Unlock()
			mu.Lock()
			inside[id]--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if n := locks.held(); n != 0 {
		t.Fatalf("%d session locks kept after every chat ended", n)
	}
}

// A chat queued behind another of its session whose context ends leaves
// the queue holding nothing; one whose context ended before its turn came
// is not served even when the turn is free at once (#42: 8 of 9 queued
// requests whose callers had left reached the provider).
func TestSessionLockQueueSkipsCallersThatLeft(t *testing.T) {
	var locks sessionLocks
	unlock, err := locks.lock(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	const queued = 9
	ctxs := make([]context.CancelFunc, queued)
	errs := make(chan error, queued)
	for i := range queued {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		go func() {
			u, err := locks.lock(ctx, "s")
			if err == nil {
				u()
			}
			errs <- err
		}()
	}
	for _, cancel := range ctxs {
		cancel()
	}
	for range queued {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("queued chat whose caller left got the session (err %v)", err)
		}
	}
	unlock()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := locks.lock(gone, "s"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller already gone got a free session: %v", err)
	}
	if n := locks.held(); n != 0 {
		t.Fatalf("%d entries kept", n)
	}
	u, err := locks.lock(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	u()
}
