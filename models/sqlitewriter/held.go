package sqlitewriter

import (
	"context"
	"database/sql"
	"sync"
)

// HeldWrite is a write a request holds back instead of waiting for a
// commit of its own (the settlement of an LLM call): Job runs in a batch
// of the writer, as a job of its own, in front of the request's next write
// (see GroupCommit.Do); Then receives its outcome once that batch
// committed (nil) or failed.
type HeldWrite struct {
	Job  func(ctx context.Context, tx *sql.Tx) error
	Then func(ctx context.Context, err error)
}

// Held are the writes one request holds for the writer (the store keeps it
// in the request's context; models.CommitLater). Its zero value is ready.
type Held struct {
	mu     sync.Mutex
	writes []HeldWrite
	closed bool // Take(true) ran: the request is over
}

// Add holds w; false when the request is over (a write arriving after it
// is made by its caller at once).
func (h *Held) Add(w HeldWrite) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.writes = append(h.writes, w)
	return true
}

// Take returns the held writes and forgets them; end also ends the
// holding (see Add).
func (h *Held) Take(end bool) []HeldWrite {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.writes
	h.writes = nil
	h.closed = h.closed || end
	return out
}
