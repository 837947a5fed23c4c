package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Schedule run statuses.
const (
	ScheduleRunRunning = "running"
	// ScheduleRunWaiting: the firing's run is parked for a person
	// (WaitingFor says what for); it goes on running after the decision.
	ScheduleRunWaiting   = "waiting"
	ScheduleRunSucceeded = "succeeded"
	ScheduleRunFailed    = "failed"
	// ScheduleRunSkipped: the firing did not run the agent (cost admission
	// refused it, the agent is disabled or gone, the output channel is off).
	ScheduleRunSkipped = "skipped"
)

// ScheduleRun is one firing of a scheduled agent (WorkflowID is the
// firing's workflow id, unique per firing).
type ScheduleRun struct {
	WorkflowID string `gorm:"primaryKey;size:191"`
	AgentID    string `gorm:"size:100;index:idx_schedule_runs_agent_started,priority:1"`
	Trigger    string `gorm:"size:16"` // cron or manual
	Status     string `gorm:"size:16"`
	// WaitingFor is what a waiting firing waits for (approval).
	WaitingFor string `gorm:"size:16"`
	Error      string
	// Code is the admission rejection code of a skipped firing.
	Code       string    `gorm:"size:64"`
	SessionID  string    `gorm:"size:191"`
	RunID      string    `gorm:"size:64"`
	DeliveryID string    `gorm:"size:64"`
	StartedAt  time.Time `gorm:"index:idx_schedule_runs_agent_started,priority:2"`
	FinishedAt *time.Time
}

// SaveScheduleRun inserts or updates a firing's record.
func (s *Store) SaveScheduleRun(ctx context.Context, r *ScheduleRun) error {
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now().UTC()
	}
	if err := s.DB.WithContext(ctx).Save(r).Error; err != nil {
		return fmt.Errorf("record firing %s: %w", r.WorkflowID, err)
	}
	return nil
}

// FinishScheduleRun sets the final status of a firing, creating its record
// when the run never wrote one; approvals the firing still waited for are
// cancelled.
func (s *Store) FinishScheduleRun(ctx context.Context, r ScheduleRun) error {
	now := time.Now().UTC()
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.FinishedAt = &now
	r.WaitingFor = ""
	set := map[string]any{"status": r.Status, "error": r.Error, "finished_at": now, "waiting_for": ""}
	// Fields the caller knows; empty ones keep what the record has.
	for col, v := range map[string]string{"code": r.Code, "session_id": r.SessionID, "run_id": r.RunID, "delivery_id": r.DeliveryID} {
		if v != "" {
			set[col] = v
		}
	}
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "workflow_id"}},
			DoUpdates: clause.Assignments(set),
		}).Create(&r).Error; err != nil {
			return err
		}
		return closeFiringApprovals(tx, r.WorkflowID, now)
	})
	if err != nil {
		return fmt.Errorf("record firing %s: %w", r.WorkflowID, err)
	}
	return nil
}

// LastScheduleRuns returns the newest firing of each of the agents.
func (s *Store) LastScheduleRuns(ctx context.Context, agentIDs []string) (map[string]ScheduleRun, error) {
	out := map[string]ScheduleRun{}
	for _, id := range agentIDs {
		var r ScheduleRun
		err := s.DB.WithContext(ctx).Where("agent_id = ?", id).Order("started_at DESC").Limit(1).Take(&r).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read last firing of %s: %w", id, err)
		}
		out[id] = r
	}
	return out, nil
}
