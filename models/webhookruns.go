package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Statuses of an asynchronous webhook run.
const (
	WebhookRunQueued    = "queued"
	WebhookRunRunning   = "running"
	WebhookRunSucceeded = "succeeded"
	WebhookRunFailed    = "failed"
)

// WebhookRun is one asynchronous inbound webhook run
// (POST /webhooks/{agent_id}?async=true): what GET
// /webhooks/{agent_id}/runs/{run_id} answers.
type WebhookRun struct {
	ID         string `gorm:"primaryKey;size:64"`
	AgentID    string `gorm:"size:100;index"`
	Subject    string `gorm:"size:191"`
	UserID     string `gorm:"size:191"`
	SessionID  string `gorm:"size:191"`
	ThreadID   string `gorm:"size:191"`
	Status     string `gorm:"size:16"`
	Reply      string
	Error      string
	ResponseID string `gorm:"size:64"`
	DeliveryID string `gorm:"size:64"`
	Turns      int
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// CreateWebhookRun inserts a run record; one that exists (the workflow or
// an earlier request wrote it) is kept as it is.
func (s *Store) CreateWebhookRun(ctx context.Context, r *WebhookRun) error {
	now := time.Now().UTC()
	r.CreatedAt, r.UpdatedAt = now, now
	if err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(r).Error; err != nil {
		return fmt.Errorf("record webhook run %s: %w", r.ID, err)
	}
	return nil
}

// UpdateWebhookRun sets the given columns of a run.
func (s *Store) UpdateWebhookRun(ctx context.Context, id string, set map[string]any) error {
	set["updated_at"] = time.Now().UTC()
	if err := s.DB.WithContext(ctx).Model(&WebhookRun{}).Where("id = ?", id).Updates(set).Error; err != nil {
		return fmt.Errorf("update webhook run %s: %w", id, err)
	}
	return nil
}

// GetWebhookRun returns a run (ErrNotFound if none).
func (s *Store) GetWebhookRun(ctx context.Context, id string) (*WebhookRun, error) {
	var r WebhookRun
	err := s.DB.WithContext(ctx).Take(&r, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read webhook run %s: %w", id, err)
	}
	return &r, nil
}
