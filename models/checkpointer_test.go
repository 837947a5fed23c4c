package models

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The checkpointer copies the WAL into the database file from its own
// connection; commits checkpoint only past defaultWALPages.
func TestCheckpointerCopiesTheWAL(t *testing.T) {
	s := mustOpen(t, Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "agentry.db")})
	ctx := context.Background()
	var auto int
	if err := s.DB.Raw("PRAGMA wal_autocheckpoint").Scan(&auto).Error; err != nil || auto != defaultWALPages {
		t.Fatalf("wal_autocheckpoint of a pooled connection = %d, %v; want %d", auto, err, defaultWALPages)
	}
	before := s.checkpoints.Copied()
	filler := strings.Repeat("x", 2000)
	for i := range 300 {
		if err := s.DB.Create(&testWidget{Name: fmt.Sprintf("w%d", i), Color: filler}).Error; err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.checkpoints.Copied() == before {
		if time.Now().After(deadline) {
			t.Fatal("no WAL frame was copied into the database file in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A checkpoint asked for explicitly succeeds on the checkpointer's own
	// connection while the pool stays open.
	if err := s.checkpoints.Checkpoint(ctx, "PASSIVE"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := s.DB.Model(&testWidget{}).Count(&n).Error; err != nil || n != 300 {
		t.Fatalf("rows after checkpoints = %d, %v; want 300", n, err)
	}
}

// A writer that never pauses still gets its WAL started again: a PASSIVE
// checkpoint beside it never completes (frames arrive while it copies), so
// the commits themselves must finish the job past the page limit. With
// checkpoints left to the checkpointer alone, the WAL grew by everything
// written (2.4 GB in a 2-minute chat soak).
func TestWALStaysBoundedUnderAWriterThatNeverPauses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentry.db")
	const pages = 200 // 800 KiB
	s := mustOpen(t, Options{Driver: DriverSQLite, DSN: path, walPagesForTest: pages})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Readers keep snapshots open now and then, as the API's reads do.
	go func() {
		for ctx.Err() == nil {
			var n int64
			s.DB.WithContext(ctx).Model(&testWidget{}).Count(&n)
		}
	}()
	row := strings.Repeat("x", 6000)
	var largest int64
	const rows = 1200 // 7 MB written
	for i := range rows {
		if err := s.DB.Create(&testWidget{Name: fmt.Sprintf("w%d", i), Color: row}).Error; err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > largest {
				largest = fi.Size()
			}
		}
	}
	if limit := int64(6 * pages * 4096); largest > limit {
		t.Fatalf("the WAL grew to %d bytes under a steady writer (page limit %d pages): it is never started again", largest, pages)
	}
	t.Logf("largest WAL: %d bytes", largest)
}
