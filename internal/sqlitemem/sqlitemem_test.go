package sqlitemem

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// Configure succeeds before the first open, is idempotent, and SQLite
// works afterwards (pages come from the slab: a RETURNING statement inside
// a transaction, the pattern that used to map and unmap on every call).
func TestConfigureBeforeFirstOpen(t *testing.T) {
	if err := Configure(); err != nil {
		t.Fatal(err)
	}
	if err := Configure(); err != nil {
		t.Fatalf("second call: %v", err)
	}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "t.db")+"?_pragma=journal_mode(WAL)&_pragma=temp_store(MEMORY)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE c (k TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO c VALUES ('a', 0), ('b', 0), ('c', 0)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(`UPDATE c SET n = n + 1 WHERE k IN ('a', 'b') RETURNING k, n`)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for rows.Next() {
			got++
		}
		rows.Close()
		if got != 2 {
			t.Fatalf("RETURNING gave %d rows, want 2", got)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT n FROM c WHERE k = 'a'`).Scan(&n); err != nil || n != 200 {
		t.Fatalf("n = %d, %v; want 200", n, err)
	}
}

// SQLite runs on the block methods: statements whose programs and values
// pass 16 KiB (grown by realloc, freed, reused) give the right results, and
// the blocks kept for reuse stay within their bound.
func TestBlocksServeLargeAllocations(t *testing.T) {
	if err := Configure(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A 2000-term IN list compiles to a program of several thousand
	// opcodes; group_concat grows its result by realloc past 1 MiB.
	in := strings.Repeat("?,", 1999) + "?"
	args := make([]any, 2000)
	for i := range args {
		args[i] = i
	}
	for range 3 {
		var n int
		if err := db.QueryRow(`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 2999)
			SELECT count(*) FROM s WHERE i IN (`+in+`)`, args...).Scan(&n); err != nil || n != 2000 {
			t.Fatalf("count = %d, %v; want 2000", n, err)
		}
		var l int
		if err := db.QueryRow(`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM s WHERE i < 9999)
			SELECT length(group_concat(printf('%0120d', i), '')) FROM s`).Scan(&l); err != nil || l != 1200000 {
			t.Fatalf("length = %d, %v; want 1200000", l, err)
		}
	}
	blocks.mu.Lock()
	defer blocks.mu.Unlock()
	for log, k := range blocks.kept {
		if len(k) > 0 && len(k) > keptMax(uint(log)) {
			t.Errorf("class %d keeps %d blocks, more than %d", log, len(k), keptMax(uint(log)))
		}
	}
}

// Every request fits the block it gets, and rounding is stable (SQLite
// asks xRoundup(n) and then relies on xSize of the block).
func TestBlockRounding(t *testing.T) {
	for _, n := range []int32{1, 8, 9, 24, 4088, 4089, 16376, 16377, 1<<20 - 8, 1<<20 - 7, 3 << 20} {
		r := xRoundup(nil, n)
		if r < n || xRoundup(nil, r) != r {
			t.Errorf("xRoundup(%d) = %d, xRoundup of that %d", n, r, xRoundup(nil, r))
		}
	}
}
