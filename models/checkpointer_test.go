package models

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Commits never checkpoint (wal_autocheckpoint=0 on every pooled
// connection); the checkpointer copies the WAL into the database file from
// its own connection. Without it the WAL would grow for as long as the
// gateway writes.
func TestCheckpointerCopiesTheWALInsteadOfTheWriters(t *testing.T) {
	s := mustOpen(t, Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "agentry.db")})
	ctx := context.Background()
	var auto int
	if err := s.DB.Raw("PRAGMA wal_autocheckpoint").Scan(&auto).Error; err != nil || auto != 0 {
		t.Fatalf("wal_autocheckpoint of a pooled connection = %d, %v; want 0", auto, err)
	}
	before := s.checkpoints.copied.Load()
	filler := strings.Repeat("x", 2000)
	for i := range 300 {
		if err := s.DB.Create(&testWidget{Name: fmt.Sprintf("w%d", i), Color: filler}).Error; err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.checkpoints.copied.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no WAL frame was copied into the database file in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A checkpoint runs beside a writer: PASSIVE takes no lock the writer
	// waits for.
	if err := s.checkpoints.checkpoint(ctx, "PASSIVE"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := s.DB.Model(&testWidget{}).Count(&n).Error; err != nil || n != 300 {
		t.Fatalf("rows after checkpoints = %d, %v; want 300", n, err)
	}
}

// Close stops the loop; a second Close (error paths of Open) is harmless.
func TestCheckpointerStops(t *testing.T) {
	s := mustOpen(t, Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "agentry.db")})
	s.checkpoints.Close()
	s.checkpoints.Close()
	select {
	case <-s.checkpoints.done:
	default:
		t.Fatal("the checkpoint loop still runs after Close")
	}
}
