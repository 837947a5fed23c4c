package chat

import "sync"

// sessionLocks serialises the chats of one session (their turns must not
// interleave in its history) while keeping an entry only for sessions with
// a chat in progress: a lock per session ever seen grew without bound (a
// 10-minute soak of fresh sessions added about 100 MiB of RSS).
type sessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

type sessionLock struct {
	mu   sync.Mutex
	refs int // chats holding or waiting for mu; the entry goes at 0
}

// lock waits for the session's lock and returns its release.
func (s *sessionLocks) lock(id string) (unlock func()) {
	s.mu.Lock()
	if s.locks == nil {
		s.locks = map[string]*sessionLock{}
	}
	l := s.locks[id]
	if l == nil {
		l = &sessionLock{}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
}

// held reports how many sessions have an entry (for tests).
func (s *sessionLocks) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}
