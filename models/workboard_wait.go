package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Budget waits: a task run whose LLM turn cost governance refuses for a
// hard budget or a token quota parks (status waiting, waiting_for budget)
// instead of failing, and resumes when admission lets the turn through
// (workflows/budgetwait.go). These write the run record and its event in
// one transaction; approvals park through RequestApproval.

// WaitingForBudget: the run waits until cost admission lets its next LLM
// turn through (budget raised, period rolled over, reservations released).
const WaitingForBudget = "budget"

// Events of run waits.
const (
	EventRunWaiting = "run.waiting"
	EventRunResumed = "run.resumed"
)

// RunWait describes one park of a run: why, for which turn, until when.
type RunWait struct {
	RunID      int64
	Attempt    int
	Turn       int
	WaitingFor string
	// Code is the rejection code (budget_exceeded, quota); Reason its text.
	Code   string
	Reason string
	// Until is when the wait gives up (the run then fails).
	Until time.Time
	// Waited is how long the run was parked (ResumeRun).
	Waited time.Duration
}

// ParkRun moves an active run to waiting (w.WaitingFor) and writes
// run.waiting; repeating it for the same run, attempt and turn writes
// nothing new. It reports whether the run was active.
func (s *Store) ParkRun(ctx context.Context, w RunWait) (bool, error) {
	return s.waitTransition(ctx, w, []string{RunQueued, RunRunning, RunWaiting}, RunWaiting, w.WaitingFor, EventRunWaiting,
		map[string]any{"waiting_for": w.WaitingFor, "turn": w.Turn, "code": w.Code, "reason": truncateUTF8(w.Reason, 2000),
			"wait_until": w.Until.UTC()})
}

// ResumeRun moves a run waiting for w.WaitingFor back to running and
// writes run.resumed (once per run, attempt and turn).
func (s *Store) ResumeRun(ctx context.Context, w RunWait) (bool, error) {
	return s.waitTransition(ctx, w, []string{RunWaiting}, RunRunning, "", EventRunResumed,
		map[string]any{"waiting_for": w.WaitingFor, "turn": w.Turn, "waited_ms": w.Waited.Milliseconds()})
}

func (s *Store) waitTransition(ctx context.Context, w RunWait, from []string, to, waitingFor, event string, payload map[string]any) (bool, error) {
	var active bool
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var run TaskRun
		if err := tx.First(&run, w.RunID).Error; errors.Is(err, gorm.ErrRecordNotFound) {
			return &NotFoundError{Kind: "run", ID: w.RunID}
		} else if err != nil {
			return fmt.Errorf("read run %d: %w", w.RunID, err)
		}
		q := tx.Model(&TaskRun{}).Where("id = ? AND status IN ?", w.RunID, from)
		if to == RunRunning {
			q = q.Where("waiting_for = ?", w.WaitingFor) // an approval wait is not ours to end
		}
		res := q.Updates(map[string]any{"status": to, "waiting_for": waitingFor, "updated_at": time.Now().UTC()})
		if res.Error != nil {
			return fmt.Errorf("run %d to %s: %w", w.RunID, to, res.Error)
		}
		active = RunActive(run.Status)
		if !active {
			return nil
		}
		ev := NewEvent(event, fmt.Sprintf("%s:%d:a%d:t%d:%s", event, w.RunID, w.Attempt, w.Turn, w.WaitingFor), payload)
		ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = run.TaskID, run.ID, run.AgentID, run.Attempt
		_, err := insertEvent(tx, s.Driver, &ev)
		return err
	})
	return active, err
}

// CountRunsWaitingFor counts the task runs parked for waitingFor now.
func (s *Store) CountRunsWaitingFor(ctx context.Context, waitingFor string) (int64, error) {
	var n int64
	if err := s.DB.WithContext(ctx).Model(&TaskRun{}).Where("status = ? AND waiting_for = ?", RunWaiting, waitingFor).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count runs waiting for %s: %w", waitingFor, err)
	}
	return n, nil
}

// RunsWaitingFor lists the task runs parked for waitingFor now.
func (s *Store) RunsWaitingFor(ctx context.Context, waitingFor string) ([]TaskRun, error) {
	var runs []TaskRun
	if err := s.DB.WithContext(ctx).Where("status = ? AND waiting_for = ?", RunWaiting, waitingFor).Order("id").Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("list runs waiting for %s: %w", waitingFor, err)
	}
	return runs, nil
}
