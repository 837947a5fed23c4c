package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

func openGrouped(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "g.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.Group == nil {
		t.Fatal("SQLite store without its group commit writer")
	}
	return s
}

// TestGroupCommitIsolatesAFailedJob: concurrent jobs share batches; one that
// fails leaves no row while every other job's row is committed when its Do
// returns.
func TestGroupCommitIsolatesAFailedJob(t *testing.T) {
	s := openGrouped(t)
	ctx := context.Background()
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
				if err := insertTestSession(ctx, s.Group, tx, fmt.Sprintf("s%d", i)); err != nil {
					return err
				}
				if i%7 == 0 {
					return boom // after writing: the batch runs again without it
				}
				return nil
			})
			if errs[i] == nil {
				var n int64
				s.DB.Raw("SELECT COUNT(*) FROM chat_sessions WHERE id = ?", fmt.Sprintf("s%d", i)).Scan(&n)
				if n != 1 {
					t.Errorf("job %d returned before its row was committed", i)
				}
			}
		}()
	}
	wg.Wait()
	var rows int64
	s.DB.Raw("SELECT COUNT(*) FROM chat_sessions").Scan(&rows)
	want := int64(0)
	for i, err := range errs {
		switch {
		case i%7 == 0 && !errors.Is(err, boom):
			t.Errorf("job %d: %v, want boom", i, err)
		case i%7 != 0 && err != nil:
			t.Errorf("job %d: %v", i, err)
		case i%7 != 0:
			want++
		}
	}
	if rows != want {
		t.Fatalf("%d rows, want %d", rows, want)
	}
	if b, w := s.Group.Stats(); w != int64(len(errs)) || b == 0 {
		t.Fatalf("stats: %d batches, %d writes", b, w)
	}
}

// BenchmarkGroupCommit: chat-exchange-sized jobs (a session upsert, an
// action-log row and two messages) from many goroutines through the single
// writer.
func BenchmarkGroupCommit(b *testing.B) {
	s := openGrouped(b)
	benchExchanges(b, func(ctx context.Context, sess *ChatSession, run *AgentRun, msgs []ChatMessage) error {
		return s.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error { return s.saveExchangeSQL(ctx, tx, sess, run, msgs) })
	})
	batches, writes := s.Group.Stats()
	b.ReportMetric(float64(writes)/float64(max(batches, 1)), "jobs/batch")
}

// BenchmarkTransactionPerExchange is the same work without the group
// commit: one GORM transaction per exchange (the path before it).
func BenchmarkTransactionPerExchange(b *testing.B) {
	s := openGrouped(b)
	s.Group.Close()
	s.Group = nil
	benchExchanges(b, s.SaveExchange)
}

// benchExchanges saves exchanges of fresh sessions from 16 goroutines per
// core.
func benchExchanges(b *testing.B, save func(context.Context, *ChatSession, *AgentRun, []ChatMessage) error) {
	ctx := context.Background()
	b.SetParallelism(16)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("s%d", n.Add(1))
			err := save(ctx, &ChatSession{ID: id, AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "chat"},
				&AgentRun{RunID: "run-" + id, ResponseID: "resp-" + id, AgentID: "a", SessionID: id, Status: "finished"},
				[]ChatMessage{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An exchange with more messages than one INSERT takes stores them all, in
// order, after the session's earlier messages.
func TestGroupCommitStoresLongExchangesInOrder(t *testing.T) {
	s := openGrouped(t)
	ctx := context.Background()
	sess := &ChatSession{ID: "long", AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "chat"}
	var msgs []ChatMessage
	for i := range maxMessagesPerInsert + 3 {
		msgs = append(msgs, ChatMessage{RunID: "r1", Role: "user", Content: fmt.Sprintf("m%d", i)})
	}
	if err := s.SaveExchange(ctx, sess, nil, msgs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveExchange(ctx, sess, nil, msgs[1:]); err != nil {
		t.Fatal(err)
	}
	got, err := s.recentMessages(ctx, "long", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("%d messages stored, want %d", len(got), len(msgs))
	}
	for i, m := range got {
		if m.Seq != int64(i+1) || m.Content != fmt.Sprintf("m%d", i) {
			t.Fatalf("message %d = seq %d %q", i, m.Seq, m.Content)
		}
	}
}

// Exchanges of one new session written at once without the chat's session
// lock (webhooks, firings) are numbered one after another: the first skips
// reading the last number (the session has none), the others read it, in
// the same batch or the next, before the first's batch is acknowledged.
func TestGroupCommitNumbersConcurrentExchangesOfANewSession(t *testing.T) {
	s := openGrouped(t)
	ctx := context.Background()
	for round := range 20 {
		id := fmt.Sprintf("new-%d", round)
		const writers = 8
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sess := &ChatSession{ID: id, AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "webhook"}
				msgs := []ChatMessage{{RunID: fmt.Sprint(w), Role: "user", Content: "q"}, {RunID: fmt.Sprint(w), Role: "assistant", Content: "a"}}
				if err := s.SaveExchange(ctx, sess, nil, msgs); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, err := s.recentMessages(ctx, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2*writers {
			t.Fatalf("round %d: %d messages, want %d", round, len(got), 2*writers)
		}
		for i, m := range got {
			if m.Seq != int64(i+1) {
				t.Fatalf("round %d: message %d has seq %d (numbers reused or skipped)", round, i, m.Seq)
			}
			if i%2 == 1 && m.RunID != got[i-1].RunID {
				t.Fatalf("round %d: an exchange's messages are not together: %+v", round, got)
			}
		}
	}
	if msgs, ok := s.history.get("never-written", 10); !ok || msgs != nil {
		t.Fatal("the history cache does not know a new session has no messages")
	}
}

// TestGroupCommitFirstUseOfAStatementUnderLoad: a job using a statement for
// the first time while every pooled connection is held by a writer waiting
// for SQLite's write lock (which the job's transaction holds) must not wait
// for a pooled connection: the writers would each time out with "database is
// locked" (task runs failed with 500s under load this way).
func TestGroupCommitFirstUseOfAStatementUnderLoad(t *testing.T) {
	s := openGrouped(t)
	ctx := context.Background()
	const waiting = 3 // the pool has 4 connections: one is the writer's
	errs := make(chan error, waiting)
	var started sync.WaitGroup
	err := s.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
		// Take the write lock.
		if _, err := tx.ExecContext(ctx, `INSERT INTO chat_sessions (id, agent_id, subject, user_id, username, source, created_at, updated_at, session_key) VALUES ('w', 'a', 's', 'u', 'u', 'chat', '2026-01-01', '2026-01-01', 1)`); err != nil {
			return err
		}
		for i := range waiting {
			started.Add(1)
			go func() {
				started.Done()
				errs <- s.DB.Exec(`INSERT INTO chat_sessions (id, agent_id, subject, user_id, username, source, created_at, updated_at, session_key) VALUES (?, 'a', 's', 'u', 'u', 'chat', '2026-01-01', '2026-01-01', ?)`, fmt.Sprintf("p%d", i), i+2).Error
			}()
		}
		started.Wait()
		for range 50 { // let them take their connections and wait for the lock
			runtime.Gosched()
		}
		waitForPoolInUse(t, s, waiting+1)
		return s.Group.Exec(ctx, tx, `UPDATE chat_sessions SET username = 'first use' WHERE id = ?`, "w")
	})
	if err != nil {
		t.Fatal(err)
	}
	for range waiting {
		if err := <-errs; err != nil {
			t.Fatalf("a writer waiting for the lock failed: %v", err)
		}
	}
	var name string
	s.DB.Raw("SELECT username FROM chat_sessions WHERE id = 'w'").Scan(&name)
	if name != "first use" {
		t.Fatalf("the job's write is missing: %q", name)
	}
}

// waitForPoolInUse waits (bounded) until n pooled connections are in use.
func waitForPoolInUse(t *testing.T, s *Store, n int) {
	t.Helper()
	sqlDB, err := s.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if sqlDB.Stats().InUse >= n {
			return
		}
		runtime.Gosched()
	}
	t.Logf("only %d connections in use (wanted %d): the test may not exercise the full pool", sqlDB.Stats().InUse, n)
}

// TestGroupCommitSurvivesAPanickingJob: a job that panics fails alone (its
// caller gets an error), the others of its batch commit, and later writes
// still go through, whichever goroutine ran the batch.
func TestGroupCommitSurvivesAPanickingJob(t *testing.T) {
	s := openGrouped(t)
	ctx := context.Background()
	write := func(id string) func(ctx context.Context, tx *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			return insertTestSession(ctx, s.Group, tx, id)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn := write(fmt.Sprintf("s%d", i))
			if i%10 == 0 {
				fn = func(ctx context.Context, tx *sql.Tx) error {
					if err := write(fmt.Sprintf("s%d", i))(ctx, tx); err != nil {
						return err
					}
					panic("boom")
				}
			}
			errs[i] = s.Group.Do(ctx, heldFor(ctx), fn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i%10 == 0) != (err != nil) {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if err := s.Group.Do(ctx, heldFor(ctx), write("after")); err != nil {
		t.Fatalf("write after the panics: %v", err)
	}
	var n int64
	s.DB.Raw("SELECT COUNT(*) FROM chat_sessions").Scan(&n)
	if n != 37 {
		t.Fatalf("%d sessions, want 36 + 1", n)
	}
}

// testSessionKeys gives the session rows tests write keys of their own.
var testSessionKeys atomic.Int64

// insertTestSession writes a session row with id in tx.
func insertTestSession(ctx context.Context, g *sqlitewriter.GroupCommit, tx *sql.Tx, id string) error {
	return g.Exec(ctx, tx, insertSessionSQL, id, "a", "sub", "u", "u", "chat", "2026-01-01", "2026-01-01", testSessionKeys.Add(1))
}
