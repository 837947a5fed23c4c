package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// WaitingForCostCap: the run waits until its run tree's cost cap (the
// task's or the agent's max_cost_usd) is raised; its task is in
// needs_review meanwhile (issue 47, docs/costs.md "Cost caps").
const WaitingForCostCap = "cost_cap"

// CostCapAuthor is the author of the comment a cost-cap wait leaves.
const CostCapAuthor = "agentry"

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
		fresh, err := insertEvent(tx, s.Driver, &ev)
		if err != nil || !fresh || res.RowsAffected == 0 || w.WaitingFor != WaitingForCostCap {
			return err
		}
		// Once per park (the event's dedupe key): a repeated step leaves one
		// comment.
		return costCapTask(tx, s.Driver, run.TaskID, fmt.Sprintf("Run %d", run.ID), w, to == RunWaiting)
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

// costCapTask moves the task of a run that parks for its cost cap to
// needs_review with a comment saying what was spent against which cap, and
// back to running when the run resumes (a task someone moved on meanwhile
// is left where it is).
func costCapTask(tx *gorm.DB, driver string, taskID int64, who string, w RunWait, parking bool) error {
	t, err := getTask(tx, taskID)
	if err != nil {
		return err
	}
	from, to := TaskRunning, TaskNeedsReview
	if !parking {
		from, to = TaskNeedsReview, TaskRunning
	}
	now := time.Now().UTC()
	moved := tx.Model(&Task{}).Where("id = ? AND status = ?", t.ID, from).Updates(map[string]any{"status": to, "updated_at": now})
	if moved.Error != nil {
		return fmt.Errorf("task %d to %s: %w", t.ID, to, moved.Error)
	}
	if moved.RowsAffected > 0 {
		t.Status, t.UpdatedAt = to, now
		up := taskEvent(EventTaskUpdated, "", t, []string{"status"})
		if _, err := insertEvent(tx, driver, &up); err != nil {
			return err
		}
	}
	if !parking {
		return nil
	}
	body := fmt.Sprintf("%s paused at turn %d: %s. Raise the task's max_cost_usd (PATCH /api/v1/workboard/tasks/%d, or agentry task update %d --max-cost-usd N) to let it go on, or cancel the run. The turns already paid for are kept.",
		who, w.Turn, strings.TrimSuffix(truncateUTF8(w.Reason, 1500), "."), t.ID, t.ID)
	c := Comment{TaskID: t.ID, Author: CostCapAuthor, Body: body, Kind: CommentNote, CreatedAt: now}
	if err := tx.Create(&c).Error; err != nil {
		return fmt.Errorf("comment on task %d: %w", t.ID, err)
	}
	ev := NewEvent(EventCommentCreated, fmt.Sprintf("comment.created:%d", c.ID), map[string]any{
		"comment_id": c.ID, "author": c.Author, "kind": c.Kind, "decision": c.Decision,
	})
	ev.TaskID, ev.AgentID = t.ID, t.AgentID
	_, err = insertEvent(tx, driver, &ev)
	return err
}

// RunCostCap is the cost cap of a task run's tree in micro-dollars (0:
// none): the max_cost_usd of the task of rootRunID (a TaskRunLedgerID:
// the tree's root run), or of taskID when the run is its own root. Read at
// every LLM turn, so a raised cap counts from the next turn on.
func (s *Store) RunCostCap(ctx context.Context, taskID int64, rootRunID string) (int64, error) {
	var caps []int64
	q := s.DB.WithContext(ctx).Model(&Task{})
	if id, ok := TaskRunIDFromLedger(rootRunID); ok {
		q = q.Where("id = (SELECT task_id FROM task_runs WHERE id = ?)", id)
	} else {
		q = q.Where("id = ?", taskID)
	}
	if err := q.Pluck("max_cost_micros", &caps).Error; err != nil {
		return 0, fmt.Errorf("cost cap of task %d: %w", taskID, err)
	}
	if len(caps) == 0 {
		return 0, nil
	}
	return caps[0], nil
}
