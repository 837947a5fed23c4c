package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// setLinger changes how long the writer's transaction may linger, on the
// writer's goroutine.
func setLinger(t testing.TB, st *Store, d time.Duration) {
	t.Helper()
	if err := st.Group.Do(context.Background(), nil, func(context.Context, *sql.Tx) error { st.Group.SetLinger(d); return nil }); err != nil {
		t.Fatal(err)
	}
}

// Batches acknowledged while the writer's transaction lingers are in the
// redo log only; a process that dies then (its files as they are) loses
// none of them: the next open runs them again, once.
func TestLingeringBatchesSurviveACrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live, l := journalTestLedger(t, filepath.Join(dir, "live.db"), false)
	setLinger(t, live, time.Hour)
	now := time.Now().UTC()
	for i := range 5 {
		sess := &ChatSession{ID: fmt.Sprintf("s%d", i), AgentID: "a", Subject: "alice", Source: "chat"}
		run := &AgentRun{RunID: fmt.Sprintf("r%d", i), AgentID: "a", SessionID: sess.ID, Status: "ok", StartedAt: now}
		msgs := []ChatMessage{{Role: "user", Content: fmt.Sprintf("hello %d", i)}, {Role: "assistant", Content: "hi"}}
		if err := live.SaveExchange(ctx, sess, run, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("c1", now), AdmissionID: "a-c1", Keys: []string{"d"}, WorstMicros: 40,
		ExpiresAt: now.Add(time.Hour)}); err != nil || !res.Admitted {
		t.Fatalf("admit: %+v %v", res, err)
	}
	if _, err := l.SettleCall(ctx, Settlement{CallID: "c1", AdmissionID: "a-c1", ReservationID: "a-c1", Keys: []string{"d"},
		Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 25, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	if !live.Group.Unsettled() {
		t.Fatal("nothing lingers: the test would prove nothing")
	}

	// The process dies now (no read has made the writer commit).
	crashed := filepath.Join(dir, "crashed.db")
	copyDatabase(t, filepath.Join(dir, "live.db"), crashed)
	withoutRedo := filepath.Join(dir, "without-redo.db")
	copyDatabase(t, filepath.Join(dir, "live.db"), withoutRedo)
	if err := os.Remove(withoutRedo + "-redo"); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", withoutRedo)
	if err != nil {
		t.Fatal(err)
	}
	var committed int
	if err := raw.QueryRow("SELECT COUNT(*) FROM chat_messages").Scan(&committed); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if committed != 0 {
		t.Fatalf("%d messages committed to SQLite already: the batches did not linger", committed)
	}

	for round := range 2 { // a second start runs nothing twice
		st, rl := journalTestLedger(t, crashed, false)
		for i := range 5 {
			msgs, err := st.recentMessages(ctx, fmt.Sprintf("s%d", i), 10)
			if err != nil || len(msgs) != 2 || msgs[0].Content != fmt.Sprintf("hello %d", i) || msgs[0].Seq != 1 || msgs[1].Seq != 2 {
				t.Fatalf("round %d: session s%d: %+v %v", round, i, msgs, err)
			}
			if _, err := st.AgentRunByID(ctx, fmt.Sprintf("r%d", i)); err != nil {
				t.Fatalf("round %d: run r%d: %v", round, i, err)
			}
		}
		if n := countRows(t, st, "chat_messages"); n != 10 {
			t.Fatalf("round %d: %d messages, want 10", round, n)
		}
		if r, err := rl.GetLedgerEntry(ctx, "c1"); err != nil || r.Outcome != OutcomeSucceeded || r.CostMicros != 25 || r.Executions != 1 {
			t.Fatalf("round %d: settled row %+v %v", round, r, err)
		}
		if c := dbCounter(t, st, "d"); c.SpentMicros != 25 || c.ReservedMicros != 0 {
			t.Fatalf("round %d: counter %+v", round, c)
		}
		st.Close()
		if fi, err := os.Stat(crashed + "-redo"); err != nil || fi.Size() != 0 {
			t.Fatalf("round %d: redo log after a clean close: %v %v", round, fi, err)
		}
	}
	// The sessions' keys were in the redo log only: a session created after
	// the restart gets a key above every one the replay stored.
	st, _ := journalTestLedger(t, crashed, false)
	after := &ChatSession{ID: "after", AgentID: "a", Subject: "alice", Source: "chat"}
	if err := st.SaveExchange(ctx, after, nil, []ChatMessage{{Role: "user", Content: "after the crash"}}); err != nil {
		t.Fatal(err)
	}
	var most int64
	if err := st.DB.Raw("SELECT MAX(session_key) FROM chat_sessions WHERE id <> 'after'").Scan(&most).Error; err != nil {
		t.Fatal(err)
	}
	if most < 5 || after.Key <= most {
		t.Fatalf("a session created after the crash got key %d; the replayed sessions' largest is %d", after.Key, most)
	}
	if msgs, err := st.recentMessages(ctx, "after", 10); err != nil || len(msgs) != 1 || msgs[0].Seq != 1 {
		t.Fatalf("history of the new session: %+v %v", msgs, err)
	}
}

// A read on another connection sees what the writer acknowledged, and a
// write there does not wait for the lingering to end.
func TestReadersAndOtherWritersDoNotWaitForTheLinger(t *testing.T) {
	ctx := context.Background()
	st := openGrouped(t)
	setLinger(t, st, time.Hour)
	sess := &ChatSession{ID: "s", AgentID: "a", Subject: "alice", Source: "chat"}
	if err := st.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: "x"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var n int64
		if err := st.DB.Model(&ChatMessage{}).Where("session_id = ?", "s").Count(&n).Error; err != nil || n != 1 {
			done <- fmt.Errorf("read %d messages (%v), want 1", n, err)
			return
		}
		if err := st.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: "y"}}); err != nil {
			done <- err
			return
		}
		done <- st.DB.Create(&Feedback{Subject: "alice", ResponseID: "r", Rating: 1}).Error
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a reader or another writer waited for the lingering transaction")
	}
}

// A batch that fails after others were acknowledged in the same lingering
// transaction rolls them back with it; they are run again, so none is lost.
func TestAFailedBatchKeepsTheAcknowledgedOnes(t *testing.T) {
	ctx := context.Background()
	st := openGrouped(t)
	setLinger(t, st, time.Hour)
	insert := func(id string, fail bool) error {
		return st.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
			if err := insertTestSession(ctx, st.Group, tx, id); err != nil {
				return err
			}
			if fail {
				return errors.New("boom")
			}
			return nil
		})
	}
	if err := insert("kept-1", false); err != nil {
		t.Fatal(err)
	}
	if err := insert("failed", true); err == nil {
		t.Fatal("the failing batch succeeded")
	}
	if err := insert("kept-2", false); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := st.DB.Model(&ChatSession{}).Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids, []string{"kept-1", "kept-2"}) {
		t.Fatalf("sessions %v", ids)
	}
}

// A bulk of the session window (see sessionWindow) written while the
// writer's transaction lingers is in the redo log only; after a crash the
// next open runs it again with the sessions' inserts, and every session is
// found by its id again, the older ones through chat_session_ids, and
// continued under its own key.
func TestASessionBulkSurvivesACrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live, _ := journalTestLedger(t, filepath.Join(dir, "live.db"), false)
	setLinger(t, live, time.Hour)
	live.window.max = 4
	keys := map[string]int64{}
	for i := range 10 {
		sess := &ChatSession{ID: fmt.Sprintf("s%d", i), AgentID: "a", Subject: "alice", Source: "chat"}
		if err := live.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: "one"}}); err != nil {
			t.Fatal(err)
		}
		keys[sess.ID] = sess.Key
	}
	if !live.window.spilled || !live.Group.Unsettled() {
		t.Fatal("no bulk lingers: the test would prove nothing")
	}
	crashed := filepath.Join(dir, "crashed.db")
	copyDatabase(t, filepath.Join(dir, "live.db"), crashed)

	st, _ := journalTestLedger(t, crashed, false)
	var through, digested int64
	if err := st.DB.Raw("SELECT (SELECT session_key FROM chat_session_ids_through), (SELECT COUNT(*) FROM chat_session_ids)").Row().Scan(&through, &digested); err != nil {
		t.Fatal(err)
	}
	if through == 0 || digested == 0 {
		t.Fatalf("after the replay: mark %d, %d digests; want the bulk written", through, digested)
	}
	for id, key := range keys {
		if _, inWindow := st.window.get(id); inWindow == (key <= through) {
			t.Fatalf("%s (key %d, mark %d): in the window %v", id, key, through, inWindow)
		}
		if got, err := st.GetSession(ctx, id); err != nil || got.Key != key {
			t.Fatalf("GetSession(%s): %+v, %v", id, got, err)
		}
		sess := &ChatSession{ID: id, AgentID: "a", Subject: "alice", Source: "chat"}
		if err := st.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: "two"}}); err != nil {
			t.Fatal(err)
		}
		if sess.Key != key {
			t.Fatalf("%s continued under key %d after the crash, want %d", id, sess.Key, key)
		}
		if msgs, err := st.recentMessages(ctx, id, 10); err != nil || len(msgs) != 2 || msgs[1].Seq != 2 {
			t.Fatalf("history of %s: %+v %v", id, msgs, err)
		}
	}
	if n := countRows(t, st, "chat_sessions"); n != 10 {
		t.Fatalf("%d session rows after the crash, want 10", n)
	}
}
