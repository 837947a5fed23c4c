package models

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// journalTestLedger opens a SQLite store at path (with the admission
// journal unless noJournal) and its cost ledger, with counter "d" seeded.
func journalTestLedger(t testing.TB, path string, noJournal bool) (*Store, *CostLedger) {
	t.Helper()
	ctx := context.Background()
	st := mustOpen(t, Options{Driver: DriverSQLite, DSN: path, noJournalForTest: noJournal})
	l, err := NewCostLedger(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); st.Close() })
	now := time.Now().UTC()
	if err := l.EnsureBudgetCounters(ctx, []CounterSeed{{Key: "d", From: now.Add(-time.Hour), To: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	return st, l
}

// dbCounter reads counter key from the database itself (BudgetCounters
// adds what the journal holds).
func dbCounter(t *testing.T, st *Store, key string) CounterValue {
	t.Helper()
	v := CounterValue{Key: key}
	if err := st.DB.Raw("SELECT spent_micros, reserved_micros FROM cost_budget_counters WHERE counter_key = ?", key).Row().Scan(&v.SpentMicros, &v.ReservedMicros); err != nil {
		t.Fatal(err)
	}
	return v
}

// setHold changes the journal's hold on the writer's goroutine.
func setHold(t *testing.T, st *Store, d time.Duration) {
	t.Helper()
	if err := st.Group.Do(context.Background(), nil, func(context.Context, *sql.Tx) error { st.hook.journal.hold = d; return nil }); err != nil {
		t.Fatal(err)
	}
}

func countRows(t *testing.T, st *Store, table string) int64 {
	t.Helper()
	var n int64
	if err := st.DB.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// A journaled admission settled before its hold leaves exactly the row and
// counters an admission committed through SQLite leaves: same columns, same
// spend, no reservation. A retried call id (a second execution) too.
func TestJournaledCallLeavesTheSameRowAsACommittedOne(t *testing.T) {
	ctx := context.Background()
	journaled, jl := journalTestLedger(t, filepath.Join(t.TempDir(), "j.db"), false)
	committed, cl := journalTestLedger(t, filepath.Join(t.TempDir(), "c.db"), true)
	if journaled.hook.journal == nil || committed.hook.journal != nil {
		t.Fatal("want one store with the journal and one without")
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	run := func(l *CostLedger) {
		t.Helper()
		steps := []struct {
			call, admission string
			keys            []string
			settle          bool
		}{
			{"c1", "a1", []string{"d"}, true},
			{"c2", "a2", nil, true},            // enforcement off: the row alone
			{"c3", "a3a", []string{"d"}, true}, // executed twice: the second reuses the row
			{"c3", "a3b", []string{"d"}, true},
		}
		for i, s := range steps {
			e := pendingEntry(s.call, now)
			e.RunID, e.RootRunID, e.Trigger, e.EstimatedInputTokens, e.MaxOutputTokens = "run-1", "root-1", "api", 12, 100
			res, err := l.AdmitCall(ctx, AdmitParams{Entry: e, AdmissionID: s.admission, Keys: s.keys, WorstMicros: 50, ExpiresAt: now.Add(time.Hour)})
			if err != nil || !res.Admitted {
				t.Fatalf("admit %s: %+v %v", s.admission, res, err)
			}
			r, err := l.SettleCall(ctx, Settlement{CallID: s.call, AdmissionID: s.admission, ReservationID: s.admission, Keys: s.keys,
				Outcome: OutcomeSucceeded, FinishReason: "stop", ResponseModel: "gpt-x", ProviderRequestID: fmt.Sprintf("req-%d", i),
				Attempts: 2, InputTokens: 12, OutputTokens: int64(7 + i), UsageEstimated: i == 1, CostMicros: int64(30 + i), FinishedAt: now.Add(time.Second)})
			if err != nil || !r.Applied {
				t.Fatalf("settle %s: %+v %v", s.admission, r, err)
			}
			if len(s.keys) > 0 && (!r.Released || r.ReleasedMicros != 50) {
				t.Fatalf("settle %s released %+v", s.admission, r)
			}
		}
	}
	run(jl)
	run(cl)
	for _, call := range []string{"c1", "c2", "c3"} {
		a, err := jl.GetLedgerEntry(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cl.GetLedgerEntry(ctx, call)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("row %s differs:\njournaled %+v\ncommitted %+v", call, a, b)
		}
	}
	if a, b := dbCounter(t, journaled, "d"), dbCounter(t, committed, "d"); a != b || a.SpentMicros != 30+32+33 || a.ReservedMicros != 0 {
		t.Fatalf("counters: journaled %+v committed %+v", a, b)
	}
	if n := countRows(t, journaled, "cost_reservations"); n != 0 {
		t.Fatalf("%d reservation rows left", n)
	}
}

// copyDatabase copies a SQLite database with its WAL and admission journal
// while its process is idle: what a SIGKILL would leave on disk.
func copyDatabase(t *testing.T, from, to string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-admissions-0", "-admissions-1", "-redo"} {
		b, err := os.ReadFile(from + suffix)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// After a crash, the journal's admissions that were neither settled nor
// written come back as pending rows holding their reservations (what a
// committed admission leaves), once; settled ones do not come back, even
// when their done line was lost.
func TestJournalRecoversTheAdmissionsOfACrashedProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live, l := journalTestLedger(t, filepath.Join(dir, "live.db"), false)
	now := time.Now().UTC()
	for _, id := range []string{"c1", "c2", "c3"} {
		p := AdmitParams{Entry: pendingEntry(id, now), AdmissionID: "a-" + id, Keys: []string{"d"}, WorstMicros: 40,
			ExpiresAt: now.Add(time.Hour)}
		if id == "c3" {
			// Clamped by the decision, after the request encoded its entry
			// for the journal: the line must carry what was decided.
			e := p.Entry
			p.Fit = func([]CounterValue) (int64, bool) {
				e.MaxOutputTokens, e.Clamped = 7, true
				return 30, true
			}
		}
		if res, err := l.AdmitCall(ctx, p); err != nil || !res.Admitted {
			t.Fatalf("admit %s: %+v %v", id, res, err)
		}
	}
	if _, err := l.SettleCall(ctx, Settlement{CallID: "c1", AdmissionID: "a-c1", ReservationID: "a-c1", Keys: []string{"d"},
		Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 25, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	if cs, _ := l.BudgetCounters(ctx, []string{"d"}); cs["d"].ReservedMicros != 70 || cs["d"].SpentMicros != 25 {
		t.Fatalf("live counters (journal included) = %+v", cs["d"])
	}
	if rs, _ := l.SummarizeReservations(ctx, now); rs.Count != 2 || rs.ReservedMicros != 70 {
		t.Fatalf("live reservations (journal included) = %+v", rs)
	}
	if n := countRows(t, live, "cost_ledger"); n != 1 {
		t.Fatalf("live database has %d ledger rows before the hold, want 1 (the settled call)", n)
	}

	// The process dies now: its files as they are.
	crashed := filepath.Join(dir, "crashed.db")
	copyDatabase(t, filepath.Join(dir, "live.db"), crashed)
	// Lose the done line of c1 as well: the database says it is settled.
	j0, err := os.ReadFile(crashed + "-admissions-0")
	if err != nil {
		t.Fatal(err)
	}
	var kept [][]byte
	for _, line := range bytes.SplitAfter(j0, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"k":"d"`)) {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(crashed+"-admissions-0", bytes.Join(kept, nil), 0o600); err != nil {
		t.Fatal(err)
	}

	for round := range 2 { // a second start recovers nothing twice
		st, rl := journalTestLedger(t, crashed, false)
		for _, id := range []string{"c2", "c3"} {
			r, err := rl.GetLedgerEntry(ctx, id)
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, id, err)
			}
			reserved, maxOut, clamped := int64(40), pendingEntry(id, now).MaxOutputTokens, false
			if id == "c3" {
				reserved, maxOut, clamped = 30, 7, true
			}
			if r.Outcome != OutcomePending || r.ReservedMicros != reserved || r.MaxOutputTokens != maxOut || r.Clamped != clamped ||
				r.Executions != 1 || r.Attempts != 1 {
				t.Fatalf("round %d: recovered row %+v", round, r)
			}
		}
		if r, _ := rl.GetLedgerEntry(ctx, "c1"); r.Outcome != OutcomeSucceeded || r.Executions != 1 || r.CostMicros != 25 {
			t.Fatalf("round %d: settled row %+v", round, r)
		}
		if c := dbCounter(t, st, "d"); c.ReservedMicros != 70 || c.SpentMicros != 25 {
			t.Fatalf("round %d: recovered counter %+v", round, c)
		}
		if n := countRows(t, st, "cost_reservations"); n != 2 {
			t.Fatalf("round %d: %d reservation rows, want 2", round, n)
		}
		st.Close()
	}
}

// An admission whose settlement does not come within the hold (a long
// stream) is written to the database like a committed one; its settlement
// then completes that row. Closing the store writes what is still held.
func TestJournalWritesAdmissionsHeldTooLong(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	st, l := journalTestLedger(t, path, false)
	setHold(t, st, 50*time.Millisecond)
	now := time.Now().UTC()
	if _, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("slow", now), AdmissionID: "a-slow", Keys: []string{"d"}, WorstMicros: 40,
		ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for countRows(t, st, "cost_reservations") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the held admission was never written")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r, _ := l.GetLedgerEntry(ctx, "slow"); r == nil || r.Outcome != OutcomePending {
		t.Fatalf("written row %+v", r)
	}
	if c := dbCounter(t, st, "d"); c.ReservedMicros != 40 {
		t.Fatalf("counter after the hold %+v", c)
	}
	if cs, _ := l.BudgetCounters(ctx, []string{"d"}); cs["d"].ReservedMicros != 40 {
		t.Fatalf("reserved counted twice (database and journal): %+v", cs["d"])
	}
	res, err := l.SettleCall(ctx, Settlement{CallID: "slow", AdmissionID: "a-slow", ReservationID: "a-slow", Keys: []string{"d"},
		Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 15, FinishedAt: now})
	if err != nil || !res.Released || res.ReleasedMicros != 40 {
		t.Fatalf("settle %+v %v", res, err)
	}
	if c := dbCounter(t, st, "d"); c.ReservedMicros != 0 || c.SpentMicros != 15 {
		t.Fatalf("counter after settling %+v", c)
	}

	// Held at close: written then, and the journal is left empty.
	if _, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("at-close", now), AdmissionID: "a-close", Keys: []string{"d"}, WorstMicros: 40,
		ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	setHold(t, st, time.Hour) // not the hold: the close
	l.Close()
	st.Close()
	for _, suffix := range []string{"-admissions-0", "-admissions-1"} {
		if fi, err := os.Stat(path + suffix); err != nil || fi.Size() != 0 {
			t.Fatalf("journal %s after a clean close: %v %v", suffix, fi, err)
		}
	}
	st2, l2 := journalTestLedger(t, path, false)
	if r, err := l2.GetLedgerEntry(ctx, "at-close"); err != nil || r.Outcome != OutcomePending || r.ReservedMicros != 40 {
		t.Fatalf("row written at close %+v %v", r, err)
	}
	if c := dbCounter(t, st2, "d"); c.ReservedMicros != 40 {
		t.Fatalf("counter after reopening %+v", c)
	}
}

// A journal that cannot be written fails the admission and takes nothing:
// no budget reserved, no row; a second process on the same database admits
// through SQLite.
func TestJournalFailureTakesNothingAndASecondProcessCommits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	st, l := journalTestLedger(t, path, false)
	other := mustOpen(t, Options{Driver: DriverSQLite, DSN: path})
	defer other.Close()
	if other.hook.journal != nil {
		t.Fatal("a second process on the database took the journal too")
	}

	now := time.Now().UTC()
	st.hook.journal.files[st.hook.journal.cur].Close() // the writes now fail
	_, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("c1", now), AdmissionID: "a-c1", Keys: []string{"d"}, WorstMicros: 40,
		ExpiresAt: now.Add(time.Hour)})
	if err == nil {
		t.Fatal("admitted without a journal")
	}
	if cs, _ := l.BudgetCounters(ctx, []string{"d"}); cs["d"].ReservedMicros != 0 {
		t.Fatalf("a failed admission holds budget: %+v", cs["d"])
	}
	if n := countRows(t, st, "cost_ledger"); n != 0 {
		t.Fatalf("%d ledger rows after a failed admission", n)
	}
}

// The hold's queue: an admission stays due until it is written, settled
// ones are skipped wherever they are, and a failed write is retried after
// a pause, not at every batch.
func TestJournalDueKeepsAnAdmissionUntilItIsWritten(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &admissionJournal{hold: time.Second, now: func() time.Time { return now }}
	add := func(id string, age time.Duration, done bool) {
		j.queue = append(j.queue, &deferredAdmission{id: id, at: now.Add(-age), done: done})
	}
	ids := func(ds []*deferredAdmission) (out []string) {
		for _, d := range ds {
			out = append(out, d.id)
		}
		return out
	}
	add("settled", 3*time.Second, true)
	add("old", 2*time.Second, false)
	add("settled-out-of-order", 2*time.Second, true)
	add("young", 0, false)
	if got := ids(j.due(false)); !reflect.DeepEqual(got, []string{"old"}) {
		t.Fatalf("due = %v", got)
	}
	if got := ids(j.due(false)); !reflect.DeepEqual(got, []string{"old"}) { // not written yet: still due
		t.Fatalf("due again = %v", got)
	}
	j.backOff()
	if got := j.due(false); got != nil {
		t.Fatalf("due right after a failed write = %v", ids(got))
	}
	if at, ok := j.nextDue(); !ok || !at.Equal(now.Add(retryAfterFailure)) {
		t.Fatalf("next due %v %v", at, ok)
	}
	now = now.Add(2 * time.Second)
	if got := ids(j.due(false)); !reflect.DeepEqual(got, []string{"old", "young"}) {
		t.Fatalf("due after the pause = %v", got)
	}
	if got := ids(j.due(true)); !reflect.DeepEqual(got, []string{"old", "young"}) {
		t.Fatalf("all = %v", got)
	}
}

// The two files take turns, and a file is emptied only once every
// admission it holds is done: an admission held across many turns still
// comes back after a crash.
func TestJournalTurnsFilesWithoutLosingAHeldAdmission(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "live.db")
	st, l := journalTestLedger(t, path, false)
	if err := st.Group.Do(ctx, heldFor(ctx), func(context.Context, *sql.Tx) error {
		st.hook.journal.fileLimit, st.hook.journal.hold = 2048, time.Hour
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	admit := func(id string) {
		t.Helper()
		if res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry(id, now), AdmissionID: "a-" + id, Keys: []string{"d"}, WorstMicros: 10,
			ExpiresAt: now.Add(2 * time.Hour)}); err != nil || !res.Admitted {
			t.Fatalf("admit %s: %+v %v", id, res, err)
		}
	}
	settle := func(id string) {
		t.Helper()
		if _, err := l.SettleCall(ctx, Settlement{CallID: id, AdmissionID: "a-" + id, ReservationID: "a-" + id, Keys: []string{"d"},
			Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 1, FinishedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	// callsTurns admits and settles 200 calls and counts the writer's turns
	// from one file to the other meanwhile.
	last := 0
	callsTurns := func(prefix string) (turns int) {
		t.Helper()
		for i := range 200 {
			id := fmt.Sprintf("%s%d", prefix, i)
			admit(id)
			settle(id)
			var cur int
			_ = st.Group.Do(ctx, heldFor(ctx), func(context.Context, *sql.Tx) error { cur = st.hook.journal.cur; return nil })
			if cur != last {
				turns, last = turns+1, cur
			}
		}
		return turns
	}
	admit("long") // held across the turns below
	if turns := callsTurns("c"); turns != 1 {
		// One turn, to file 1; file 0 holds "long", so the writer stays on
		// file 1 however large it grows.
		t.Fatalf("%d turns with an admission held in file 0, want exactly 1", turns)
	}
	crashed := filepath.Join(dir, "crashed.db")
	copyDatabase(t, path, crashed)
	st2, l2 := journalTestLedger(t, crashed, false)
	if r, err := l2.GetLedgerEntry(ctx, "long"); err != nil || r.Outcome != OutcomePending || r.ReservedMicros != 10 {
		t.Fatalf("held admission after the turns and a crash: %+v %v", r, err)
	}
	if n := countRows(t, st2, "cost_ledger"); n != 201 {
		t.Fatalf("%d rows after recovery, want 201", n)
	}

	// Once "long" is done, the files take turns again.
	settle("long")
	if turns := callsTurns("d"); turns < 2 {
		t.Fatalf("%d turns once nothing is held, want several", turns)
	}
}

// The calls in flight (journaled admissions not settled) decide who runs a
// write: with more than sqlitewriter.InlineInFlightLimit the callers queue theirs for
// the writer, which gathers them into one batch; once they are settled a
// caller runs its own again.
func TestCallsInFlightSendWritesToTheWriter(t *testing.T) {
	ctx := context.Background()
	st, l := journalTestLedger(t, filepath.Join(t.TempDir(), "a.db"), false)
	g := st.Group
	now := time.Now().UTC()
	const calls = sqlitewriter.InlineInFlightLimit + 2
	for i := range calls {
		id := fmt.Sprintf("c%d", i)
		if _, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry(id, now), AdmissionID: "a-" + id, Keys: []string{"d"}, WorstMicros: 40,
			ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := g.Load(); n != calls {
		t.Fatalf("in flight after %d admissions: %d", calls, n)
	}
	if _, mayWrite := g.Load(); mayWrite {
		t.Fatal("a caller runs its own batch with calls in flight")
	}
	// A write queued meanwhile still lands (the writer takes it).
	if err := g.Do(ctx, heldFor(ctx), func(context.Context, *sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		id := fmt.Sprintf("c%d", i)
		if _, err := l.SettleCall(ctx, Settlement{CallID: id, AdmissionID: "a-" + id, ReservationID: "a-" + id, Keys: []string{"d"},
			Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 10, FinishedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := g.Load(); n != 0 {
		t.Fatalf("in flight after settling every call: %d", n)
	}
	if _, mayWrite := g.Load(); !mayWrite {
		t.Fatal("a caller never runs its own batch at low load")
	}
	if c := dbCounter(t, st, "d"); c.SpentMicros != 10*calls || c.ReservedMicros != 0 {
		t.Fatalf("counter %+v", c)
	}
}
