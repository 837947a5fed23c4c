package models

import (
	"hash/maphash"
	"sync"
)

// sessionIndex finds a session's key by its id, in memory (SQLite).
//
// On SQLite chat_sessions is keyed by session_key, given in creation order,
// and has no index on its id (data migration 7). A session id is random as
// far as an index is concerned (a hash of the caller, agent and user, or a
// name the caller chose), so an index on it took every new session into a
// random leaf page: one more page for each batch's commit to write, for
// the checkpoint to copy back and for the page cache to hold, and on the
// chat path, where most requests start a session, the largest cost of its
// writes left (docs/benchmarks.md). Keyed by session_key, a new session
// goes to the end of the table.
//
// The store finds a session by id through this index instead: one pass
// over chat_sessions fills it when the store opens (primeSessions), and
// the writer adds each session it creates. It is complete because on
// SQLite one gateway process owns the file and its group commit is the
// only writer of chat_sessions.
//
// Ids are held as 128-bit digests (two seeded 64-bit hashes), 30 to 60
// bytes a session with the map's spare room (55 MB measured at a million
// sessions). Two ids with one digest (odds about 10^-27 at a million
// sessions) would share an entry: the writer checks the id on the row it
// touches and, finding another, inserts the session with a key of its own,
// after which the older session is no longer found by id; reads by id
// check the id on the row too, so neither sees the other's messages.
type sessionIndex struct {
	seeds [2]maphash.Seed

	mu   sync.RWMutex
	keys map[sessionDigest]int64
}

type sessionDigest [2]uint64

func newSessionIndex() *sessionIndex {
	return &sessionIndex{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, keys: map[sessionDigest]int64{}}
}

func (x *sessionIndex) digest(id string) sessionDigest {
	return sessionDigest{maphash.String(x.seeds[0], id), maphash.String(x.seeds[1], id)}
}

// key returns the key of the session with id, if it has one.
func (x *sessionIndex) key(id string) (int64, bool) {
	d := x.digest(id)
	x.mu.RLock()
	k, ok := x.keys[d]
	x.mu.RUnlock()
	return k, ok
}

// set records that the session with id has key.
func (x *sessionIndex) set(id string, key int64) {
	d := x.digest(id)
	x.mu.Lock()
	x.keys[d] = key
	x.mu.Unlock()
}
