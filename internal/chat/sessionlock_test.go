package chat

import (
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
			unlock := locks.lock(id)
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
