package models

import (
	"hash/fnv"
	"sync"
)

// How the store finds a session's key by its id on SQLite.
//
// chat_sessions is keyed by session_key, in creation order (migration 7),
// and has no index on the id: a session id is random as far as an index
// is concerned, and an index on it put every new session into a random
// leaf page, one more page for each batch's commit to write and the
// checkpoint to copy back (6 % of the chat path's throughput at 64
// connections, docs/benchmarks/2026-11-history.md). Instead:
//
//   - the newest sessions (up to sessionWindowMax) are found in memory, in
//     the session window, which the writer adds each new session to;
//   - older ones in chat_session_ids, a table of (digest of the id, key)
//     the writer fills in bulk: when the window is full it writes its
//     oldest half there, sorted by digest, so the inserts touch each leaf
//     page of the table once per bulk instead of once per session
//     (spillSessions), and records the largest key written in
//     chat_session_ids_through, in the same transaction.
//
// The window drops what a bulk wrote only once its commit is known: after
// each commit, the writer reads the committed mark again (dropSpilled).
// Until then a session is found in both places, which is harmless; a bulk
// that rolled back leaves the sessions in the window for the next one.
// Digests may collide: the table keeps every (digest, key) pair and each
// look-up checks the id on the session's row.
//
// Memory stays bounded whatever the number of sessions: the window holds
// at most sessionWindowMax ids, and the history cache's filter of stored
// sessions has a fixed size (sessionFilter). The window is primed when the
// store opens from the sessions past the mark; when they fill it (rows
// another tool added), all but the newest half-window are written in one
// bulk then (spillPrimed).
type sessionWindow struct {
	max int // sessionWindowMax; smaller in tests

	mu    sync.RWMutex
	keys  map[string]int64
	order []windowEntry // in key order (the writer gives keys in order)

	// spilled is set by the writer when a bulk ran in its transaction and
	// cleared when the mark was read after a commit (writer only).
	spilled bool
}

type windowEntry struct {
	key int64
	id  string
}

// sessionWindowMax bounds the sessions the window holds: past it the
// writer writes the oldest half to chat_session_ids (a bulk of 16,384,
// about 10 ms of the writer's time every few seconds at full load).
const sessionWindowMax = 32768

func newSessionWindow() *sessionWindow {
	return &sessionWindow{max: sessionWindowMax, keys: map[string]int64{}}
}

// get returns the key of the session with id, if the window holds it.
func (w *sessionWindow) get(id string) (int64, bool) {
	w.mu.RLock()
	k, ok := w.keys[id]
	w.mu.RUnlock()
	return k, ok
}

// add records a session the writer inserted with key (larger than every
// key added before).
func (w *sessionWindow) add(id string, key int64) {
	w.mu.Lock()
	w.keys[id] = key
	w.order = append(w.order, windowEntry{key: key, id: id})
	w.mu.Unlock()
}

// size is the number of sessions the window holds.
func (w *sessionWindow) size() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.keys)
}

// full reports whether the writer should write a bulk.
func (w *sessionWindow) full() bool {
	return w.size() >= w.max
}

// oldest returns up to n of the oldest sessions the window holds (an
// entry whose id was added again with another key is skipped: its insert
// rolled back).
func (w *sessionWindow) oldest(n int) []windowEntry {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]windowEntry, 0, min(n, len(w.order)))
	for _, e := range w.order {
		if len(out) == n {
			break
		}
		if w.keys[e.id] == e.key {
			out = append(out, e)
		}
	}
	return out
}

// dropThrough forgets the sessions with a key up to through (written to
// chat_session_ids and committed).
func (w *sessionWindow) dropThrough(through int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for n < len(w.order) && w.order[n].key <= through {
		e := w.order[n]
		if w.keys[e.id] == e.key {
			delete(w.keys, e.id)
		}
		n++
	}
	if n > 0 {
		// A new slice, so the dropped entries' ids are not kept alive.
		w.order = append(make([]windowEntry, 0, len(w.order)-n+w.max/2), w.order[n:]...)
	}
}

// sessionDigest is the digest chat_session_ids holds for a session id: a
// stable hash (FNV-1a, 64 bits) made non-negative for SQLite's INTEGER.
func sessionDigest(id string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return int64(h.Sum64() >> 1)
}
