package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"modernc.org/sqlite"
)

// Storage full: the one thing a gateway cannot fix by retrying at once. The
// API answers such writes with 507 and Retry-After, /health turns degraded,
// and everything resumes by itself once space returns (decisions.md,
// "Full disk").

// sqliteFull is SQLITE_FULL: an insertion failed because the disk (or the
// database's max_page_count) is full. SQLite reports ENOSPC from its VFS
// writes with this code too.
const sqliteFull = 13

// pgDiskFull is PostgreSQL's SQLSTATE disk_full.
const pgDiskFull = "53100"

// IsStorageFull reports whether err says the database cannot store more:
// SQLite's SQLITE_FULL (extended codes included) or PostgreSQL's disk_full.
func IsStorageFull(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqliteFull {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgDiskFull {
		return true
	}
	if errors.Is(err, syscall.ENOSPC) { // a plain file's write (the admission journal)
		return true
	}
	// Drivers that wrap without %w still say it in words.
	msg := err.Error()
	return strings.Contains(msg, "database or disk is full") || strings.Contains(msg, "No space left on device")
}

// ErrStorageFull is what callers see of a storage-full error: a fixed text,
// so no path or SQL reaches an API answer.
var ErrStorageFull = errors.New("the gateway's database is out of space; free disk space on the gateway host and retry")

// healthProbe is the one-row table /health writes to learn whether the
// database still takes writes (a ping only proves it can be read).
type healthProbe struct {
	ID int       `gorm:"primaryKey;autoIncrement:false"`
	At time.Time `gorm:"not null"`
}

func (healthProbe) TableName() string { return "health_probes" }

// storageFullWindow is how long a refused write keeps CheckWritable failing.
const storageFullWindow = 15 * time.Second

// NoteStorageFull records that a write was just refused for lack of space.
// CheckWritable keeps failing for storageFullWindow after it even when its
// own small probe row still fits (SQLite reuses space its WAL file holds).
func (s *Store) NoteStorageFull() { s.storageFullAt.Store(time.Now().UnixNano()) }

// StorageFullRecently reports whether the database refused a write for lack
// of space within storageFullWindow. Every refused write of the store
// notes it (registerFullNote, the group commit), so work that retries
// somewhere nobody looks (a local activity inside a workflow task) still
// shows as stalled by it.
func (s *Store) StorageFullRecently() bool {
	_, full := s.storageFullAgo()
	return full
}

// storageFullAgo is how long ago the last refused write was, and whether
// that is within storageFullWindow.
func (s *Store) storageFullAgo() (time.Duration, bool) {
	at := s.storageFullAt.Load()
	if at == 0 {
		return 0, false
	}
	ago := time.Since(time.Unix(0, at))
	return ago, ago < storageFullWindow
}

// registerFullNote notes every write GORM runs that the database refuses
// for lack of space (NoteStorageFull).
func registerFullNote(db *gorm.DB, s *Store) error {
	note := func(tx *gorm.DB) {
		if IsStorageFull(tx.Error) {
			s.NoteStorageFull()
		}
	}
	cb := db.Callback()
	if err := cb.Create().After("gorm:create").Register("agentry:note_full_create", note); err != nil {
		return err
	}
	if err := cb.Update().After("gorm:update").Register("agentry:note_full_update", note); err != nil {
		return err
	}
	if err := cb.Delete().After("gorm:delete").Register("agentry:note_full_delete", note); err != nil {
		return err
	}
	return cb.Raw().After("gorm:raw").Register("agentry:note_full_raw", note)
}

// CheckWritable pings the database and then writes one small row, so a full
// disk shows in /health instead of only in the answers of failing writes.
func (s *Store) CheckWritable(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return s.unavailable(err)
	}
	if ago, full := s.storageFullAgo(); full {
		return fmt.Errorf("%s database refused a write %s ago: %w", s.Driver, ago.Round(time.Second), ErrStorageFull)
	}
	err := s.DB.WithContext(ctx).Exec(
		`INSERT INTO health_probes (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at`,
		time.Now().UTC()).Error
	if err == nil {
		return nil
	}
	if IsStorageFull(err) {
		return fmt.Errorf("%s database is not writable: %w", s.Driver, ErrStorageFull)
	}
	return s.unavailable(fmt.Errorf("write to %s database: %w", s.Driver, err))
}

// unavailable turns a lost connection into the fixed text of
// ErrDatabaseUnavailable (/health is read without a key: the driver's words
// name the host and user); the log of the failed request keeps them.
func (s *Store) unavailable(err error) error {
	if IsDatabaseUnavailable(err) {
		return fmt.Errorf("%s database: %w", s.Driver, ErrDatabaseUnavailable)
	}
	return err
}
