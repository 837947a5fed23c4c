package models

import (
	"context"
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

func init() {
	RegisterModels(&RunMessage{}, &RunSnapshot{})
}

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
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	m.ID = 0
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "run_key"}, {Name: "seq"}},
		DoUpdates: clause.AssignmentColumns([]string{"role", "body", "blob_sha256", "size_bytes", "created_at"}),
	}).Create(&m).Error
	if err != nil {
		return fmt.Errorf("store message %d of run %s: %w", m.Seq, m.RunKey, err)
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
