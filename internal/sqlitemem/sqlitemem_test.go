package sqlitemem

import (
	"database/sql"
	"path/filepath"
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
