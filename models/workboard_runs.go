package models

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// NewRun is a run to create.
type NewRun struct {
	TaskID     int64
	AgentID    string
	Trigger    string
	WorkflowID string
	Snapshot   string
	// RetryOf and ReusedTurns are set for a retry.
	RetryOf     *int64
	ReusedTurns int
}

// CreateRun inserts a queued run with the task's next attempt number.
// ErrRunActive (a *ConflictError naming the active run) when the task
// already has an active run: the database, not a read-then-write check,
// decides, so of two racing requests exactly one gets the run.
func (s *Store) CreateRun(ctx context.Context, nr NewRun) (*TaskRun, error) {
	var run TaskRun
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		t, err := s.lockTask(tx, nr.TaskID)
		if err != nil {
			return err
		}
		if strings.TrimSpace(t.AgentID) == "" {
			return invalidField("agent_id", "task %d has no agent_id; set one before starting a run", t.ID)
		}
		var attempt int
		if err := tx.Model(&TaskRun{}).Where("task_id = ?", t.ID).Select("COALESCE(MAX(attempt), 0)").Scan(&attempt).Error; err != nil {
			return fmt.Errorf("read attempts of task %d: %w", t.ID, err)
		}
		now := time.Now().UTC()
		active := t.ID
		run = TaskRun{TaskID: t.ID, Attempt: attempt + 1, Status: RunQueued, AgentID: nr.AgentID, Trigger: nr.Trigger,
			WorkflowID: nr.WorkflowID, ActiveTaskID: &active, CreatedAt: now, UpdatedAt: now,
			Snapshot: nr.Snapshot, RetryOf: nr.RetryOf, ReusedTurns: nr.ReusedTurns}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&run)
		if res.Error != nil {
			return fmt.Errorf("insert run of task %d: %w", t.ID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runActiveError(tx, t.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &run, nil
}

func runActiveError(tx *gorm.DB, taskID int64) error {
	e := &ConflictError{Code: ErrRunActive.Code, Msg: fmt.Sprintf("task %d already has an active run", taskID)}
	if run, err := activeRun(tx, taskID); err == nil {
		e.RunID = run.ID
		e.Msg = fmt.Sprintf("task %d already has an active run (run %d, %s)", taskID, run.ID, run.Status)
	}
	return e
}

// SetRunTemporalID records the Temporal run id of a freshly started workflow.
func (s *Store) SetRunTemporalID(ctx context.Context, runID int64, temporalRunID string) error {
	err := s.DB.WithContext(ctx).Model(&TaskRun{}).Where("id = ?", runID).
		Update("temporal_run_id", temporalRunID).Error
	if err != nil {
		return fmt.Errorf("record workflow of run %d: %w", runID, err)
	}
	return nil
}

// DeleteQueuedRun removes a run whose workflow could not be started, so
// the refused request leaves nothing behind. Runs that already started are
// kept.
func (s *Store) DeleteQueuedRun(ctx context.Context, runID int64) error {
	err := s.DB.WithContext(ctx).Where("id = ? AND status = ?", runID, RunQueued).Delete(&TaskRun{}).Error
	if err != nil {
		return fmt.Errorf("remove run %d: %w", runID, err)
	}
	return nil
}

// UnstartedRuns returns up to limit runs queued before `before` whose
// workflow was never noted as started (no Temporal run id), oldest first.
func (s *Store) UnstartedRuns(ctx context.Context, before time.Time, limit int) ([]TaskRun, error) {
	var out []TaskRun
	err := s.DB.WithContext(ctx).Where("status = ? AND temporal_run_id = '' AND created_at < ?", RunQueued, before.UTC()).
		Order("created_at").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read unstarted runs: %w", err)
	}
	return out, nil
}

// GetRun returns a run of a task (404 when either is unknown or the run
// belongs to another task).
func (s *Store) GetRun(ctx context.Context, taskID, runID int64) (*TaskRun, error) {
	var run TaskRun
	err := s.DB.WithContext(ctx).Where("id = ? AND task_id = ?", runID, taskID).First(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		if _, terr := s.GetTask(ctx, taskID); terr != nil {
			return nil, terr
		}
		return nil, &NotFoundError{Kind: "run", ID: runID}
	}
	if err != nil {
		return nil, fmt.Errorf("read run %d: %w", runID, err)
	}
	return &run, nil
}

// RunByID returns a run.
func (s *Store) RunByID(ctx context.Context, runID int64) (*TaskRun, error) {
	return runByID(s.DB.WithContext(ctx), runID)
}

func runByID(db *gorm.DB, runID int64) (*TaskRun, error) {
	var run TaskRun
	err := db.First(&run, runID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "run", ID: runID}
	}
	if err != nil {
		return nil, fmt.Errorf("read run %d: %w", runID, err)
	}
	return &run, nil
}

// ActiveRun returns the queued or running run of a task, or ErrNotFound.
func (s *Store) ActiveRun(ctx context.Context, taskID int64) (*TaskRun, error) {
	return activeRun(s.DB.WithContext(ctx), taskID)
}

func activeRun(db *gorm.DB, taskID int64) (*TaskRun, error) {
	var run TaskRun
	err := db.Where("active_task_id = ?", taskID).First(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read active run of task %d: %w", taskID, err)
	}
	return &run, nil
}

// ListRuns returns a page of a task's runs, newest first, the total number
// of its runs and the next page's cursor (0 when this is the last).
func (s *Store) ListRuns(ctx context.Context, taskID int64, p Page) ([]TaskRun, int64, int64, error) {
	if _, err := s.GetTask(ctx, taskID); err != nil {
		return nil, 0, 0, err
	}
	limit := p.limit()
	q := s.DB.WithContext(ctx).Where("task_id = ?", taskID)
	if p.Cursor > 0 {
		q = q.Where("id < ?", p.Cursor)
	}
	var runs []TaskRun
	if err := q.Order("id DESC").Limit(limit + 1).Find(&runs).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("list runs of task %d: %w", taskID, err)
	}
	var total int64
	if err := s.DB.WithContext(ctx).Model(&TaskRun{}).Where("task_id = ?", taskID).Count(&total).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("count runs of task %d: %w", taskID, err)
	}
	runs, next, err := pageOf(runs, limit, func(r TaskRun) int64 { return r.ID })
	return runs, total, next, err
}

// MarkRunStarted moves a queued run to running (and its task to running)
// with the run.started event. Repeating it (a retried activity) changes
// nothing. A run that already ended gives ErrRunNotActive.
func (s *Store) MarkRunStarted(ctx context.Context, runID int64) (*TaskRun, error) {
	var run *TaskRun
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if run, err = runByID(tx, runID); err != nil {
			return err
		}
		if !RunActive(run.Status) {
			return &ConflictError{Code: ErrRunNotActive.Code, RunID: runID, Msg: fmt.Sprintf("run %d already ended (%s)", runID, run.Status)}
		}
		if run.Status == RunQueued {
			now := time.Now().UTC()
			run.Status, run.StartedAt, run.UpdatedAt = RunRunning, &now, now
			if err := tx.Model(&TaskRun{}).Where("id = ?", runID).
				Updates(map[string]any{"status": RunRunning, "started_at": now, "updated_at": now}).Error; err != nil {
				return fmt.Errorf("start run %d: %w", runID, err)
			}
			if err := tx.Model(&Task{}).Where("id = ?", run.TaskID).
				Updates(map[string]any{"status": TaskRunning, "updated_at": now}).Error; err != nil {
				return fmt.Errorf("start run %d: task %d: %w", runID, run.TaskID, err)
			}
		}
		payload := map[string]any{"workflow_id": run.WorkflowID, "trigger": run.Trigger, "task_status": TaskRunning}
		if run.RetryOf != nil {
			payload["retry_of"], payload["reused_turns"] = *run.RetryOf, run.ReusedTurns
		}
		ev := runEvent(EventRunStarted, fmt.Sprintf("run.started:%d", runID), run, payload)
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

func runEvent(typ, key string, run *TaskRun, payload map[string]any) Event {
	ev := NewEvent(typ, key, payload)
	ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = run.TaskID, run.ID, run.AgentID, run.Attempt
	return ev
}

// RunOutcome is how a run ended.
type RunOutcome struct {
	RunID int64
	// Status is RunFinished, RunFailed or RunCancelled.
	Status       string
	Error        string
	TimedOut     bool
	Reply        string
	StopReason   string
	Turns        int
	InputTokens  int64
	OutputTokens int64
}

// taskStatusAfter is the task status a run outcome moves the task to.
func taskStatusAfter(runStatus string) string {
	switch runStatus {
	case RunFinished:
		return TaskNeedsReview
	case RunCancelled:
		return TaskTodo
	}
	return TaskFailed
}

// FinishRun records the end of an active run, moves its task (finished ->
// needs_review, failed -> failed, cancelled -> todo) and writes the run's
// one terminal event (run.finished, run.failed or run.cancelled). A run
// that already ended is left as it is: the first outcome recorded wins and
// applied is false.
func (s *Store) FinishRun(ctx context.Context, o RunOutcome) (run *TaskRun, applied bool, err error) {
	evType := map[string]string{RunFinished: EventRunFinished, RunFailed: EventRunFailed, RunCancelled: EventRunCancelled}[o.Status]
	if evType == "" {
		return nil, false, fmt.Errorf("finish run %d: %q is not a final status", o.RunID, o.Status)
	}
	if len(o.Reply) > MaxReplyBytes {
		o.Reply = truncateUTF8(o.Reply, MaxReplyBytes)
	}
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if run, err = runByID(tx, o.RunID); err != nil {
			return err
		}
		if !RunActive(run.Status) {
			return nil
		}
		now := time.Now().UTC()
		// The run's cost is what the ledger settled for its LLM calls: set
		// from the sum (not added), so recording an outcome is idempotent.
		var cost int64
		if err := tx.Model(&LedgerEntry{}).Where("run_id = ?", TaskRunLedgerID(run.ID)).
			Select("COALESCE(SUM(cost_micros), 0)").Scan(&cost).Error; err != nil {
			return fmt.Errorf("finish run %d: cost: %w", run.ID, err)
		}
		run.CostMicros = cost
		run.Status, run.Error, run.Reply, run.StopReason = o.Status, o.Error, o.Reply, o.StopReason
		run.Turns, run.InputTokens, run.OutputTokens = o.Turns, o.InputTokens, o.OutputTokens
		run.FinishedAt, run.ActiveTaskID, run.UpdatedAt, run.WaitingFor = &now, nil, now, ""
		if err := closeApprovals(tx, run.ID, now); err != nil {
			return err
		}
		if err := tx.Model(&TaskRun{}).Where("id = ?", run.ID).Updates(map[string]any{
			"waiting_for": "", "status": run.Status, "error": run.Error, "reply": run.Reply, "stop_reason": run.StopReason,
			"turns": run.Turns, "input_tokens": run.InputTokens, "output_tokens": run.OutputTokens,
			"finished_at": now, "active_task_id": nil, "updated_at": now, "cost_micros": cost,
		}).Error; err != nil {
			return fmt.Errorf("finish run %d: %w", run.ID, err)
		}
		taskStatus := taskStatusAfter(o.Status)
		if err := tx.Model(&Task{}).Where("id = ?", run.TaskID).
			Updates(map[string]any{"status": taskStatus, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("finish run %d: task %d: %w", run.ID, run.TaskID, err)
		}
		var artifacts int64
		if err := tx.Model(&Artifact{}).Where("run_id = ?", run.ID).Count(&artifacts).Error; err != nil {
			return fmt.Errorf("finish run %d: count artifacts: %w", run.ID, err)
		}
		payload := map[string]any{
			"status": run.Status, "task_status": taskStatus, "workflow_id": run.WorkflowID,
			"turns": run.Turns, "input_tokens": run.InputTokens, "output_tokens": run.OutputTokens,
			"artifacts": artifacts, "cost_micros": cost,
		}
		if run.StartedAt != nil {
			payload["duration_ms"] = now.Sub(*run.StartedAt).Milliseconds()
		}
		if run.StopReason != "" {
			payload["stop_reason"] = run.StopReason
		}
		if run.Error != "" {
			payload["error"] = run.Error
		}
		if o.TimedOut {
			payload["timed_out"] = true
		}
		if run.Reply != "" {
			payload["reply"] = truncateUTF8(run.Reply, 2000)
		}
		// One terminal event per run, whichever outcome is recorded first.
		ev := runEvent(evType, fmt.Sprintf("run.end:%d", run.ID), run, payload)
		if _, err := insertEvent(tx, s.Driver, &ev); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return run, applied, nil
}

// TaskRunLedgerID is the llm.CallMeta.RunID of the LLM calls of a task run.
func TaskRunLedgerID(runID int64) string { return "taskrun-" + strconv.FormatInt(runID, 10) }

// TaskRunIDFromLedger parses a TaskRunLedgerID.
func TaskRunIDFromLedger(s string) (int64, bool) {
	rest, ok := strings.CutPrefix(s, "taskrun-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}
