package models

import (
	"context"
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
			history := func(s *Store, session string) string {
				t.Helper()
				msgs, err := s.recentMessages(ctx, session, 50) // the database, not the cache
				if err != nil {
					t.Fatal(err)
				}
				out := ""
				for _, m := range msgs {
					out += fmt.Sprintf("%d:%s ", m.Seq, m.Content)
				}
				return out
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
				if got := history(s, session); got != want {
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
			if got := history(s, "phantom"); got != "1:p1 2:p2 " {
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
			if got := history(s, "a"); got != "1:a1 2:a2 3:a3 4:a4 " {
				t.Errorf("history of a after a restart: %q", got)
			}
		})
	}
}
