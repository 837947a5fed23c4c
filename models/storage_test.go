package models

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestIsStorageFull(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("UNIQUE constraint failed"), false},
		{fmt.Errorf("create task: %w", &pgconn.PgError{Code: "53100", Message: "could not extend file"}), true},
		{&pgconn.PgError{Code: "23505"}, false},
		{errors.New("database or disk is full (13)"), true},
		{fmt.Errorf("write: %w", errors.New("write /x: No space left on device")), true},
	} {
		if got := IsStorageFull(tc.err); got != tc.want {
			t.Errorf("IsStorageFull(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A real SQLite database whose page budget is spent answers SQLITE_FULL,
// which IsStorageFull recognises by its code, and CheckWritable reports.
func TestIsStorageFullOnSQLite(t *testing.T) {
	s, err := Open(t.Context(), Options{DSN: t.TempDir() + "/full.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn.SetMaxOpenConns(2) // max_page_count is per connection: the writer keeps one, this test uses the other
	var pages int64
	if err := s.DB.Raw("PRAGMA page_count").Scan(&pages).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Error; err != nil {
		t.Fatal(err)
	}
	full := s.DB.Exec("CREATE TABLE filler (b BLOB)").Error
	if full == nil {
		full = s.DB.Exec("INSERT INTO filler VALUES (zeroblob(65536))").Error
	}
	if !IsStorageFull(full) {
		t.Fatalf("want a storage-full error, got %v", full)
	}
}
