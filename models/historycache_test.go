package models

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func sameHistory(t *testing.T, s *Store, session string, limit int) {
	t.Helper()
	got, err := s.RecentMessages(context.Background(), session, limit)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.recentMessages(context.Background(), session, limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s limit %d: %d cached messages, %d in the database", session, limit, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Content != w.Content || g.Role != w.Role || g.RunID != w.RunID || g.ToolCalls != w.ToolCalls {
			t.Fatalf("%s limit %d message %d: cached %+v, database %+v", session, limit, i, g, w)
		}
	}
}

// TestHistoryCacheMatchesTheDatabase: whatever was written, by this store or
// before it opened, the cached history is what the database holds, including
// sessions longer than the cache keeps.
func TestHistoryCacheMatchesTheDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := Open(context.Background(), Options{Driver: DriverSQLite, DSN: path})
	if err != nil {
		t.Fatal(err)
	}
	if s.history == nil {
		t.Fatal("SQLite store without its history cache")
	}
	ctx := context.Background()
	exchange := func(s *Store, session string, turn int) {
		t.Helper()
		err := s.SaveExchange(ctx, &ChatSession{ID: session, AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "chat"}, nil,
			[]ChatMessage{{RunID: fmt.Sprint(turn), Role: "user", Content: fmt.Sprintf("q%d", turn)},
				{RunID: fmt.Sprint(turn), Role: "assistant", Content: fmt.Sprintf("a%d", turn), ToolCalls: `[{"id":"x"}]`}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Concurrent sessions, one writer each (as the chat session lock makes it).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for turn := range 5 + i*10 { // up to 150 messages: past historyKeep
				exchange(s, fmt.Sprintf("s%d", i), turn)
			}
		}()
	}
	wg.Wait()
	for i := range 8 {
		for _, limit := range []int{1, 50, historyKeep, 200} {
			sameHistory(t, s, fmt.Sprintf("s%d", i), limit)
		}
	}
	if msgs, ok := s.history.get("never", 50); !ok || len(msgs) != 0 {
		t.Fatalf("a session without messages is not answered from memory: %v %v", msgs, ok)
	}
	s.Close()

	// Reopened: the cache is primed from the file, then written through.
	s, err = Open(ctx, Options{Driver: DriverSQLite, DSN: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 8 {
		sameHistory(t, s, fmt.Sprintf("s%d", i), 50) // loaded from the database
		exchange(s, fmt.Sprintf("s%d", i), 1000)
		sameHistory(t, s, fmt.Sprintf("s%d", i), 50) // written through
		sameHistory(t, s, fmt.Sprintf("s%d", i), 3)
	}
	exchange(s, "fresh", 1)
	sameHistory(t, s, "fresh", 50)
}

// TestHistoryCacheLoadRacingAWrite: a load that read before a write
// committed does not cache what it read.
func TestHistoryCacheLoadRacingAWrite(t *testing.T) {
	c := newHistoryCache(4, 10, 1<<20)
	c.prime(filterOf(c, "s"))
	load := c.startLoad("s")
	old := []ChatMessage{{Seq: 1}, {Seq: 2}}
	c.appended("s", []ChatMessage{{Seq: 3}}) // committed while the load read
	c.finishLoad("s", load, old, 50, true)
	if _, ok := c.get("s", 50); ok {
		t.Fatal("a stale read was cached")
	}
	// A later load caches, and the entry answers only what it can.
	load = c.startLoad("s")
	c.finishLoad("s", load, []ChatMessage{{Seq: 1}, {Seq: 2}, {Seq: 3}}, 50, true)
	if got, ok := c.get("s", 2); !ok || !reflect.DeepEqual(got, []ChatMessage{{Seq: 2}, {Seq: 3}}) {
		t.Fatalf("get: %v %v", got, ok)
	}
	c.appended("s", []ChatMessage{{Seq: 4}, {Seq: 5}}) // now 5 > keep 4: oldest dropped
	if _, ok := c.get("s", 5); ok {
		t.Fatal("an entry holding the newest 4 of 5 messages answered a limit of 5")
	}
	if got, ok := c.get("s", 4); !ok || got[0].Seq != 2 || got[3].Seq != 5 {
		t.Fatalf("get: %v %v", got, ok)
	}
	c.appended("s", []ChatMessage{{Seq: 9}}) // not the continuation: forgotten
	if _, ok := c.get("s", 1); ok {
		t.Fatal("a gap in the sequence was cached")
	}
}

// The cache is bounded by the size of its messages, not only by sessions:
// long messages evict the least recently used sessions, and the count it
// keeps matches what it holds after appends, trims and evictions.
func TestHistoryCacheBoundedBySize(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	c := newHistoryCache(4, 1000, 100_000) // room for about 9 messages of 10 kB
	c.prime(filterOf(c))
	for i := range 30 {
		s := fmt.Sprintf("s%d", i)
		c.noteSession(s) // as the writer does when it stores the session
		c.appended(s, []ChatMessage{{Seq: 1, Content: long}, {Seq: 2, Content: long}})
		c.appended(s, []ChatMessage{{Seq: 3, Content: long}})
	}
	if c.bytes > c.maxBytes {
		t.Fatalf("cache holds %d bytes, bound %d", c.bytes, c.maxBytes)
	}
	total := 0
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*historyEntry)
		total += entryBytes(e.session, e.msgs)
	}
	if total != c.bytes {
		t.Fatalf("counted %d bytes, holds %d", c.bytes, total)
	}
	if _, ok := c.get("s29", 3); !ok {
		t.Fatal("the most recent session was evicted")
	}
	if _, ok := c.get("s0", 3); ok {
		t.Fatal("the oldest session is still cached past the size bound")
	}
	// A session larger than the whole bound is not kept.
	huge := strings.Repeat("y", 200_000)
	c.noteSession("big")
	c.appended("big", []ChatMessage{{Seq: 1, Content: huge}})
	if _, ok := c.get("big", 1); ok || c.bytes > c.maxBytes {
		t.Fatalf("a session over the bound was kept (%d bytes cached)", c.bytes)
	}
}

// TestHistoryReadWaitsOnlyForItsSession: reading a session's messages from
// the database makes the lingering writer commit only when that session has
// acknowledged messages not yet committed; either way the read sees every
// acknowledged message.
func TestHistoryReadWaitsOnlyForItsSession(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "h.db"), CommitLinger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exchange := func(session string, turn int) {
		t.Helper()
		err := s.SaveExchange(ctx, &ChatSession{ID: session, AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "chat"}, nil,
			[]ChatMessage{{RunID: fmt.Sprint(turn), Role: "user", Content: "q"}, {RunID: fmt.Sprint(turn), Role: "assistant", Content: "a"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// forget drops every cached history, so the next reads go to the database.
	forget := func() {
		s.history.mu.Lock()
		clear(s.history.entries)
		s.history.lru.Init()
		s.history.bytes = 0
		s.history.mu.Unlock()
	}
	uncommitted := func() bool { return s.Group.Acknowledged() }
	read := func(session string, want int) {
		t.Helper()
		msgs, err := s.RecentMessages(ctx, session, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != want {
			t.Fatalf("%s: %d messages read, want %d", session, len(msgs), want)
		}
	}

	exchange("a", 1)
	exchange("b", 1)
	s.Group.Sync() // both committed
	exchange("a", 2)
	if !uncommitted() {
		t.Fatal("the writer committed at once: this test needs it to linger")
	}
	forget()
	read("b", 2)
	if !uncommitted() {
		t.Fatal("reading a session with nothing uncommitted made the writer commit")
	}
	read("a", 4) // waits for the commit of its second exchange
	if uncommitted() {
		t.Fatal("reading a session with acknowledged messages did not make the writer commit them")
	}
}

// filterOf is a filter of stored sessions holding sessions, for c.
func filterOf(c *historyCache, sessions ...string) *sessionFilter {
	f := newSessionFilter(len(sessions))
	for _, s := range sessions {
		f.add(c.hash(s))
	}
	return f
}
