package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The run log: what a durable agent run (task run, scheduled firing,
// asynchronous webhook run) said and heard, stored by its activities so
// that the run's Temporal history carries references and short summaries
// only. internal/runlog puts large bodies into content-addressed files
// under the workspace and keeps the reference here.

// RunMessage is one message of a durable run's conversation at position
// Seq. A retried activity writes the same (RunKey, Seq) again, so a row is
// replaced, never doubled.
type RunMessage struct {
	ID     int64  `gorm:"primaryKey;autoIncrement"`
	RunKey string `gorm:"size:191;not null;uniqueIndex:idx_run_messages_key_seq,priority:1"`
	Seq    int    `gorm:"not null;uniqueIndex:idx_run_messages_key_seq,priority:2"`
	Role   string `gorm:"size:32;not null"`
	// Body is the message as JSON when it is small; otherwise empty and
	// BlobSHA256 names the file that holds it.
	Body       string `gorm:"type:text"`
	BlobSHA256 string `gorm:"size:64"`
	SizeBytes  int64  `gorm:"not null;default:0"`
	CreatedAt  time.Time
}

// RunSnapshot is an agent definition resolved for a run, by content hash:
// runs carry the hash, so a definition changed while they are in flight
// never changes them.
type RunSnapshot struct {
	SHA256    string `gorm:"primaryKey;size:64"`
	Body      string `gorm:"type:text;not null"`
	CreatedAt time.Time
}

// PutRunMessage stores (or replaces) the message at seq of a run.
func (s *Store) PutRunMessage(ctx context.Context, m RunMessage) error {
	return s.PutRunMessages(ctx, m)
}

// putRunMessageSQL is PutRunMessage's statement for the group commit.
const putRunMessageSQL = `INSERT INTO run_messages (run_key, seq, role, body, blob_sha256, size_bytes, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_key, seq) DO UPDATE SET role = excluded.role, body = excluded.body,
blob_sha256 = excluded.blob_sha256, size_bytes = excluded.size_bytes, created_at = excluded.created_at`

// PutRunMessages stores (or replaces) messages of runs in one
// transaction. On SQLite they go through the group commit (a prepared
// statement, one commit for every write of the batch) and it returns once
// they are committed; each run step writes one to three of them, the
// hottest writes of a task run.
func (s *Store) PutRunMessages(ctx context.Context, ms ...RunMessage) error {
	if len(ms) == 0 {
		return nil
	}
	now := time.Now().UTC()
	for i := range ms {
		if ms[i].CreatedAt.IsZero() {
			ms[i].CreatedAt = now
		}
		ms[i].ID = 0
	}
	var err error
	if s.Group != nil {
		err = s.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
			for _, m := range ms {
				if err := s.Group.Exec(ctx, tx, putRunMessageSQL, m.RunKey, m.Seq, m.Role, m.Body, m.BlobSHA256, m.SizeBytes, m.CreatedAt); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		err = s.DB.WithContext(ctx).Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "run_key"}, {Name: "seq"}},
			DoUpdates: clause.AssignmentColumns([]string{"role", "body", "blob_sha256", "size_bytes", "created_at"}),
		}).Create(&ms).Error
	}
	if err != nil {
		if len(ms) == 1 {
			return fmt.Errorf("store message %d of run %s: %w", ms[0].Seq, ms[0].RunKey, err)
		}
		return fmt.Errorf("store %d messages of run %s: %w", len(ms), ms[0].RunKey, err)
	}
	return nil
}

// RunMessages returns the messages of a run with Seq < before, in order.
func (s *Store) RunMessages(ctx context.Context, runKey string, before int) ([]RunMessage, error) {
	var rows []RunMessage
	err := s.DB.WithContext(ctx).Where("run_key = ? AND seq < ?", runKey, before).Order("seq").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("load messages of run %s: %w", runKey, err)
	}
	return rows, nil
}

// RunMessageAt returns the message at seq of a run (ErrNotFound if none).
func (s *Store) RunMessageAt(ctx context.Context, runKey string, seq int) (*RunMessage, error) {
	var row RunMessage
	err := s.DB.WithContext(ctx).Where("run_key = ? AND seq = ?", runKey, seq).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load message %d of run %s: %w", seq, runKey, err)
	}
	return &row, nil
}

// LastRunMessage returns the run's message with the highest position
// (ErrNotFound when the run has none).
func (s *Store) LastRunMessage(ctx context.Context, runKey string) (*RunMessage, error) {
	var row RunMessage
	err := s.DB.WithContext(ctx).Where("run_key = ?", runKey).Order("seq DESC").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load the last message of run %s: %w", runKey, err)
	}
	return &row, nil
}

// PutRunSnapshot stores a snapshot; storing the same hash again is a no-op.
func (s *Store) PutRunSnapshot(ctx context.Context, sha, body string) error {
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&RunSnapshot{SHA256: sha, Body: body, CreatedAt: time.Now().UTC()}).Error
	if err != nil {
		return fmt.Errorf("store run snapshot %s: %w", sha, err)
	}
	return nil
}

// RunSnapshotBody returns a snapshot's body (ErrNotFound if none).
func (s *Store) RunSnapshotBody(ctx context.Context, sha string) (string, error) {
	var row RunSnapshot
	err := s.DB.WithContext(ctx).Where("sha256 = ?", sha).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("load run snapshot %s: %w", sha, err)
	}
	return row.Body, nil
}

// DeleteRunMessages removes every message of a run (a retry whose start
// was undone).
func (s *Store) DeleteRunMessages(ctx context.Context, runKey string) error {
	if err := s.DB.WithContext(ctx).Where("run_key = ?", runKey).Delete(&RunMessage{}).Error; err != nil {
		return fmt.Errorf("remove messages of run %s: %w", runKey, err)
	}
	return nil
}
