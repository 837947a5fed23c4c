package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// HookCursor is how far an event hook has read the event stream.
type HookCursor struct {
	HookKey     string `gorm:"primaryKey;size:64"`
	LastEventID int64
	UpdatedAt   time.Time
}

// GetHookCursor returns the last event id handled by a hook; found is
// false for a hook that never ran.
func (s *Store) GetHookCursor(ctx context.Context, key string) (int64, bool, error) {
	var c HookCursor
	err := s.DB.WithContext(ctx).First(&c, "hook_key = ?", key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read hook cursor: %w", err)
	}
	return c.LastEventID, true, nil
}

// SetHookCursor moves a hook's cursor forward (never back).
func (s *Store) SetHookCursor(ctx context.Context, key string, eventID int64) error {
	now := time.Now().UTC()
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "hook_key"}},
		DoUpdates: clause.Assignments(map[string]any{
			"last_event_id": gorm.Expr("CASE WHEN hook_cursors.last_event_id < ? THEN ? ELSE hook_cursors.last_event_id END", eventID, eventID),
			"updated_at":    now,
		}),
	}).Create(&HookCursor{HookKey: key, LastEventID: eventID, UpdatedAt: now}).Error
	if err != nil {
		return fmt.Errorf("save hook cursor: %w", err)
	}
	return nil
}
