package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
)

// TestSessionKeys: on both databases a session's messages continue their
// numbering across exchanges, and a session stored without messages (a
// failed run) gets its messages found later. On SQLite, where messages are
// found by the session's key, a new session gets a key of its own, an
// existing one keeps it and its one row, and the keys continue after a
// restart above every stored one.
func TestSessionKeys(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opts := b.opts(t)
			ctx := context.Background()
			s := mustOpen(t, opts)
			exchange := func(s *Store, session string, texts ...string) *ChatSession {
				t.Helper()
				sess := &ChatSession{ID: session, AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "chat"}
				var msgs []ChatMessage
				for _, text := range texts {
					msgs = append(msgs, ChatMessage{Role: "user", Content: text})
				}
				if err := s.SaveExchange(ctx, sess, nil, msgs); err != nil {
					t.Fatal(err)
				}
				return sess
			}
			a1 := exchange(s, "a", "a1", "a2")
			b1 := exchange(s, "b", "b1")
			a2 := exchange(s, "a", "a3")
			if b.name == DriverSQLite && (a1.Key <= 0 || b1.Key <= 0 || a1.Key == b1.Key || a2.Key != a1.Key) {
				t.Fatalf("keys: a %d then %d, b %d; want a's kept and b's its own", a1.Key, a2.Key, b1.Key)
			}
			exchange(s, "failed") // a run that failed: the session, no messages
			exchange(s, "failed", "f1")
			for session, want := range map[string]string{"a": "1:a1 2:a2 3:a3 ", "b": "1:b1 ", "failed": "1:f1 "} {
				if got := storedHistory(t, s, session); got != want {
					t.Errorf("history of %s: %q, want %q", session, got, want)
				}
			}
			if got, err := s.GetSession(ctx, "b"); err != nil || got.ID != "b" || got.Key != b1.Key {
				t.Fatalf("GetSession(b): %+v, %v", got, err)
			}
			if _, err := s.GetSession(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("GetSession(nobody): %v, want ErrNotFound", err)
			}
			if b.name != DriverSQLite {
				return
			}
			// A session stored again keeps its one row (found by its id and
			// touched).
			var rows int64
			if err := s.DB.Raw("SELECT COUNT(*) FROM chat_sessions WHERE id = 'a'").Scan(&rows).Error; err != nil || rows != 1 {
				t.Fatalf("rows of session a: %d, %v; want 1", rows, err)
			}
			// The filter of stored sessions answers "maybe" for a session
			// that has no row (a false positive): the writer looks, finds
			// none and inserts it.
			s.history.noteSession("phantom")
			if p := exchange(s, "phantom", "p1", "p2"); p.Key <= b1.Key {
				t.Fatalf("phantom got key %d, not a new one", p.Key)
			}
			if got := storedHistory(t, s, "phantom"); got != "1:p1 2:p2 " {
				t.Errorf("history of phantom: %q", got)
			}
			s.Close()
			s = mustOpen(t, opts)
			c := exchange(s, "c", "c1")
			var most int64
			if err := s.DB.Raw("SELECT MAX(session_key) FROM chat_sessions WHERE id <> 'c'").Scan(&most).Error; err != nil {
				t.Fatal(err)
			}
			if c.Key <= most {
				t.Fatalf("a session created after a restart got key %d, not above the stored %d", c.Key, most)
			}
			if again := exchange(s, "a", "a4"); again.Key != a1.Key {
				t.Errorf("a after a restart: key %d, want its own %d", again.Key, a1.Key)
			}
			if got := storedHistory(t, s, "a"); got != "1:a1 2:a2 3:a3 4:a4 " {
				t.Errorf("history of a after a restart: %q", got)
			}
		})
	}
}

// TestSessionWindowSpills: on SQLite the newest sessions are found in
// memory and older ones in chat_session_ids, written in bulk when the
// window is full. Every session stays found by its id (its row, its
// history, its next exchange continuing it) while the window stays
// bounded, after a bulk that rolled back, and after a restart.
func TestSessionWindowSpills(t *testing.T) {
	ctx := context.Background()
	opts := backends[0].opts(t) // SQLite
	s := mustOpen(t, opts)
	s.window.max = 8
	exchange := func(s *Store, session, text string) *ChatSession {
		t.Helper()
		sess := &ChatSession{ID: session, AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "chat"}
		if err := s.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: text}}); err != nil {
			t.Fatal(err)
		}
		return sess
	}
	checkAll := func(s *Store, n int, want string) {
		t.Helper()
		for i := range n {
			id := fmt.Sprintf("s%d", i)
			if got, err := s.GetSession(ctx, id); err != nil || got.ID != id {
				t.Fatalf("GetSession(%s): %+v, %v", id, got, err)
			}
			if got := storedHistory(t, s, id); got != want {
				t.Fatalf("history of %s: %q, want %q", id, got, want)
			}
		}
	}
	const n = 30
	keys := map[string]int64{}
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		keys[id] = exchange(s, id, "one").Key
		// A read on the pool makes the lingering transaction commit, as
		// the linger timer would within 20 ms: the window drops a bulk
		// only once it is committed, and writes the next only then.
		if _, err := s.GetSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var digested, through int64
	if err := s.DB.Raw("SELECT (SELECT COUNT(*) FROM chat_session_ids), (SELECT session_key FROM chat_session_ids_through)").Row().Scan(&digested, &through); err != nil {
		t.Fatal(err)
	}
	if digested == 0 || through == 0 || len(s.window.keys) > s.window.max {
		t.Fatalf("after %d sessions: %d digests written, mark %d, window of %d (max %d)", n, digested, through, len(s.window.keys), s.window.max)
	}
	if _, held := s.window.get("s0"); held {
		t.Fatal("the oldest session is still in the window after its bulk committed")
	}
	checkAll(s, n, "1:one ")

	// A bulk whose transaction rolls back leaves its sessions in the window.
	before := len(s.window.keys)
	err := s.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
		if err := s.spillSessions(ctx, tx, s.window.max/2); err != nil {
			return err
		}
		return errors.New("the batch fails")
	})
	if err == nil {
		t.Fatal("the failing job succeeded")
	}
	exchange(s, "after-rollback", "x") // a commit after the rollback
	if len(s.window.keys) < before {
		t.Fatalf("the window dropped sessions of a bulk that rolled back: %d, was %d", len(s.window.keys), before)
	}

	// Every session continues under its own key, found in memory or in
	// chat_session_ids, with its one row.
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		if got := exchange(s, id, "two"); got.Key != keys[id] {
			t.Fatalf("%s continued under key %d, want %d", id, got.Key, keys[id])
		}
	}
	checkAll(s, n, "1:one 2:two ")
	var rows int64
	if err := s.DB.Raw("SELECT COUNT(*) FROM chat_sessions").Scan(&rows).Error; err != nil || rows != n+1 {
		t.Fatalf("%d session rows, %v; want %d", rows, err, n+1)
	}

	// After a restart the window holds only the sessions past the mark.
	s.Close()
	s = mustOpen(t, opts)
	if err := s.DB.Raw("SELECT session_key FROM chat_session_ids_through").Scan(&through).Error; err != nil {
		t.Fatal(err)
	}
	for id, key := range s.window.keys {
		if key <= through {
			t.Fatalf("window primed with %s (key %d), at or below the mark %d", id, key, through)
		}
	}
	checkAll(s, n, "1:one 2:two ")
	// A window primed with more sessions than it holds (rows another tool
	// added) writes the excess at once, down to half its size.
	s.window.max = 4
	if err := s.spillPrimed(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.window.size(); got != 2 {
		t.Fatalf("window of %d after the bulk at open, want 2", got)
	}
	checkAll(s, n, "1:one 2:two ")
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		if got := exchange(s, id, "three"); got.Key != keys[id] {
			t.Fatalf("%s continued under key %d after a restart, want %d", id, got.Key, keys[id])
		}
	}
}

// storedHistory is session's history as the database holds it (not the
// cache): "seq:content " for each message.
func storedHistory(t *testing.T, s *Store, session string) string {
	t.Helper()
	msgs, err := s.recentMessages(context.Background(), session, 50)
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, m := range msgs {
		out += fmt.Sprintf("%d:%s ", m.Seq, m.Content)
	}
	return out
}
