package chat

import (
	"context"
	"sync"
)

// sessionLocks serialises the chats of one session (their turns must not
// interleave in its history) while keeping an entry only for sessions with
// a chat in progress: a lock per session ever seen grew without bound (a
// 10-minute soak of fresh sessions added about 100 MiB of RSS).
//
// A chat waiting for its turn leaves the queue as soon as its context is
// done (its caller hung up, its deadline passed): it never reaches the
// provider. With a plain mutex 8 of 9 queued requests whose callers had
// left were still sent to the provider, each cancelled within 50 ms (#42).
type sessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

type sessionLock struct {
	turn chan struct{} // holds one token while a chat holds the session
	refs int           // chats holding or waiting for the turn; the entry goes at 0
}

// lock waits for the session's turn and returns its release, or returns
// ctx's error, holding nothing, when ctx ends first (also when the turn
// came free at the same moment: a caller that has left is not served).
func (s *sessionLocks) lock(ctx context.Context, id string) (unlock func(), err error) {
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*sessionLock{}
	}
	l := s.locks[id]
	if l == nil {
		l = &sessionLock{turn: make(chan struct{}, 1)}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, context.Cause(ctx)
	}
	if err := ctx.Err(); err != nil {
		<-l.turn
		release()
		return nil, context.Cause(ctx)
	}
	return func() {
		<-l.turn
		release()
	}, nil
}

// held reports how many sessions have an entry (for tests).
func (s *sessionLocks) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}
