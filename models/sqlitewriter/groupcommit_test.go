package sqlitewriter

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// openTestDB opens a SQLite database of its own through the store's
// connector, with one table t(id) for the tests' writes.
func openTestDB(t testing.TB) *sql.DB {
	t.Helper()
	db := sql.OpenDB(NewConnector(filepath.Join(t.TempDir(), "w.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"))
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func insertRow(ctx context.Context, g *GroupCommit, tx *sql.Tx, id string) error {
	return g.Exec(ctx, tx, `INSERT INTO t (id) VALUES (?)`, id)
}

func countRows(t *testing.T, db *sql.DB, id string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM t WHERE id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGroupCommitShedsWhenTheQueueIsFull: a full queue refuses a new
// admission at once, while the write of admitted work (Do) waits for room
// and then commits.
func TestGroupCommitShedsWhenTheQueueIsFull(t *testing.T) {
	db := openTestDB(t)
	g := NewGroupCommit(db, 1, 1)
	defer g.Close()
	block, started := make(chan struct{}), make(chan struct{})
	go g.Do(context.Background(), nil, func(context.Context, *sql.Tx) error { close(started); <-block; return nil })
	<-started
	go g.Do(context.Background(), nil, func(context.Context, *sql.Tx) error { return nil }) // fills the queue of 1
	for len(g.jobs) < 1 {
		runtime.Gosched()
	}
	err := g.Admit(context.Background(), nil, func(context.Context, *sql.Tx) error { return nil })
	if !errors.Is(err, ErrOverloaded) {
		close(block)
		t.Fatalf("want ErrOverloaded, got %v", err)
	}
	settled := make(chan error, 1)
	go func() {
		settled <- g.Do(context.Background(), nil, func(ctx context.Context, tx *sql.Tx) error {
			return insertRow(ctx, g, tx, "settled")
		})
	}()
	close(block)
	if err := <-settled; err != nil {
		t.Fatalf("the write of admitted work was refused: %v", err)
	}
	if countRows(t, db, "settled") != 1 {
		t.Fatalf("the waiting write was not committed")
	}
}

// TestGroupCommitCloseAnswersEveryCaller: jobs queued when the writer stops
// run; a write after Close fails instead of hanging.
func TestGroupCommitCloseAnswersEveryCaller(t *testing.T) {
	db := openTestDB(t)
	g := NewGroupCommit(db, 64, 4)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.Do(context.Background(), nil, func(context.Context, *sql.Tx) error { return nil })
			if err != nil && !errors.Is(err, errGroupClosed) {
				t.Errorf("Do: %v", err)
			}
		}()
	}
	g.Close()
	wg.Wait()
	if err := g.Do(context.Background(), nil, func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, errGroupClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

// TestGroupCommitAnswersAdmissionsBeforeOtherWrites: a journaled admission
// queued behind another request's write is answered without waiting for
// that write's statements (they run in a batch after it), so its caller can
// call its provider meanwhile.
func TestGroupCommitAnswersAdmissionsBeforeOtherWrites(t *testing.T) {
	db := openTestDB(t)
	g, ctx := NewGroupCommit(db, 0, 0), context.Background()
	defer g.Close()
	release := make(chan struct{})
	// The writer is held off while both queue, so that one drain takes
	// them, the write first.
	g.writing.Lock()
	wrote := make(chan error, 1)
	go func() {
		wrote <- g.Do(ctx, nil, func(ctx context.Context, tx *sql.Tx) error {
			<-release
			return insertRow(ctx, g, tx, "written")
		})
	}()
	for len(g.jobs) < 1 {
		runtime.Gosched()
	}
	admitted := make(chan error, 1)
	go func() {
		admitted <- g.AdmitJournaled(ctx, nil, func(context.Context, *sql.Tx) error { return nil })
	}()
	for len(g.jobs) < 2 {
		runtime.Gosched()
	}
	g.writing.Unlock()
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatalf("admission: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the admission waited for a write queued before it")
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	if countRows(t, db, "written") != 1 {
		t.Fatal("the write behind the admission was not committed")
	}
}

func TestAdmissionsFirstKeepsEachGroupsOrder(t *testing.T) {
	var jobs []*commitJob
	for i := range 8 {
		// Job 7 is an admission behind its request's held writes.
		jobs = append(jobs, &commitJob{noTx: i%3 == 1 || i == 7, afterHeld: i == 7})
	}
	want := []*commitJob{jobs[1], jobs[4], jobs[0], jobs[2], jobs[3], jobs[5], jobs[6], jobs[7]}
	var scratch []*commitJob
	if n := admissionsFirst(jobs, &scratch); n != 2 {
		t.Fatalf("%d admissions, want 2", n)
	}
	for i := range want {
		if jobs[i] != want[i] {
			t.Fatalf("job %d out of order", i)
		}
	}
	for _, j := range scratch[:cap(scratch)] {
		if j != nil {
			t.Fatal("the scratch slice keeps jobs alive")
		}
	}
}

// TestHeldWritesRunFirstAndHearTheirOutcome: the writes a request holds run
// before its next write, and each hears its outcome; once the holding
// ended, a write is refused (made by its caller instead).
func TestHeldWritesRunFirstAndHearTheirOutcome(t *testing.T) {
	db := openTestDB(t)
	g, ctx := NewGroupCommit(db, 0, 0), context.Background()
	defer g.Close()
	var later Held
	var order []string
	heard := make(chan error, 1)
	later.Add(HeldWrite{
		Job: func(ctx context.Context, tx *sql.Tx) error {
			order = append(order, "held")
			return insertRow(ctx, g, tx, "held")
		},
		Then: func(_ context.Context, err error) { heard <- err },
	})
	if err := g.Do(ctx, &later, func(ctx context.Context, tx *sql.Tx) error {
		order = append(order, "own")
		return insertRow(ctx, g, tx, "own")
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-heard; err != nil {
		t.Fatalf("the held write heard %v", err)
	}
	if len(order) != 2 || order[0] != "held" || countRows(t, db, "held") != 1 || countRows(t, db, "own") != 1 {
		t.Fatalf("order %v", order)
	}
	if len(later.Take(true)) != 0 || later.Add(HeldWrite{}) {
		t.Fatal("a write was held after the holding ended")
	}
}

// With nothing queued, a write runs on its caller's goroutine: no hand-off
// to the writer and back.
func TestGroupCommitRunsAnIdleWriteOnItsCaller(t *testing.T) {
	g := NewGroupCommit(openTestDB(t), 0, 0)
	defer g.Close()
	caller := goroutineID()
	var ran string
	if err := g.Do(context.Background(), nil, func(context.Context, *sql.Tx) error { ran = goroutineID(); return nil }); err != nil {
		t.Fatal(err)
	}
	if ran != caller {
		t.Fatalf("ran on goroutine %s, called from %s", ran, caller)
	}
}

func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return strings.Fields(string(buf))[1] // "goroutine N [running]:"
}
