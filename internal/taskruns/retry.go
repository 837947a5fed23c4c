package taskruns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Retry starts a new attempt (trigger retry) of a failed or timed-out run
// that goes on from the failed attempt's recorded steps: its run log is
// copied up to the last recorded step into the new attempt's run key, its
// work directory into the new run's, and the workflow is started with the
// recorded steps (workflows.ReusedSteps), which it takes over instead of
// running them again. The new attempt uses the failed one's agent snapshot
// (same model, prompt and tools); approvals and the budget wait are the
// agent's and configuration's as they are now. Errors: 404 for an unknown
// task or run, models.ErrRunNotRetryable (409, with the run's status) for
// a run that is not failed, models.ErrRunActive (409), 400 when the run's
// agent no longer exists or is disabled, ErrTemporalUnavailable (503). A
// refused request changes nothing.
func (r *Service) Retry(ctx context.Context, taskID, runID int64) (*models.TaskRun, error) {
	principal := auth.FromContext(ctx)
	ctx, cancel := context.WithTimeout(detached.Context(ctx), 30*time.Second)
	defer cancel()

	old, err := r.Store.GetRun(ctx, taskID, runID)
	if err != nil {
		return nil, err
	}
	if old.Status != models.RunFailed {
		return nil, &models.ConflictError{Code: models.ErrRunNotRetryable.Code, RunID: runID, Status: old.Status,
			Msg: fmt.Sprintf("run %d of task %d is %s; only a failed (or timed-out) run can be retried (POST .../run starts a new run)", runID, taskID, old.Status)}
	}
	if old.Snapshot == "" {
		return nil, &models.ConflictError{Code: models.ErrRunNotRetryable.Code, RunID: runID, Status: old.Status,
			Msg: fmt.Sprintf("run %d of task %d was started by an older gateway that did not record what a retry needs; start a new run (POST .../run)", runID, taskID)}
	}
	task, err := r.Store.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	def, err := r.enabledAgent(task, old.AgentID)
	if err != nil {
		return nil, err
	}
	var snap workflows.RunSnapshot
	if err := r.Log.Snapshot(ctx, old.Snapshot, &snap); err != nil {
		return nil, err
	}
	from := workflows.RunRef{WorkflowID: old.WorkflowID, Attempt: old.Attempt}.Key()
	recorded, err := r.Log.Recorded(ctx, from)
	if err != nil {
		return nil, err
	}
	reuse, n := ReusableSteps(snap.Agent, recorded)
	reuse.RetryOf, reuse.FromAttempt = old.ID, old.Attempt

	retryOf := old.ID
	run, err := r.createRun(ctx, models.NewRun{TaskID: taskID, AgentID: old.AgentID, Trigger: workflows.TriggerRetry,
		WorkflowID: workflows.TaskRunWorkflowID(taskID), Snapshot: old.Snapshot, RetryOf: &retryOf, ReusedTurns: len(reuse.Turns)})
	if err != nil {
		return nil, err
	}
	to := workflows.RunRef{WorkflowID: run.WorkflowID, Attempt: run.Attempt}.Key()
	dir := ""
	undo := func() error {
		err := r.Log.Delete(ctx, to)
		if dir != "" {
			err = errors.Join(err, os.RemoveAll(dir))
		}
		return err
	}
	prepare := func() error {
		if err := r.Log.CopyPrefix(ctx, from, to, n); err != nil {
			return err
		}
		if r.WorkDir == nil {
			return nil
		}
		dir = r.WorkDir(taskID, run.ID)
		return copyTree(r.WorkDir(taskID, old.ID), dir)
	}
	if err := prepare(); err != nil {
		return nil, errors.Join(fmt.Errorf("prepare the retry of run %d: %w", runID, err), undo(), r.Store.DeleteQueuedRun(ctx, run.ID))
	}
	return r.launch(ctx, task, def, run, snap, subject(principal), &reuse, undo)
}

// ReusableSteps reads the recorded conversation of a failed attempt (the
// run log from position 0, without gaps) into the steps a retry takes
// over, and returns how many messages they span (what the new attempt's
// run log must hold before its first new step). A step is reused when its
// result is recorded: every LLM turn whose answer is stored, and of the
// last one the tool calls whose results are stored, in order (the first
// call without a result, and every call after it, runs again).
func ReusableSteps(in agent.Input, recorded []llm.Message) (workflows.ReusedSteps, int) {
	opening := len(in.History) + 1
	if in.SystemPrompt != "" {
		opening++
	}
	var reuse workflows.ReusedSteps
	i := opening
	for i < len(recorded) && recorded[i].Role == llm.RoleAssistant && len(reuse.Turns) < max(in.MaxTurns, 1) {
		asked := recorded[i]
		turn := workflows.ReusedTurn{Seq: i, Answer: llm.Response{Content: agent.Summary(asked.Content, workflows.ReusedTextBytes)}}
		for _, c := range asked.ToolCalls {
			turn.Answer.ToolCalls = append(turn.Answer.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name})
		}
		i++
		for _, c := range asked.ToolCalls {
			if i >= len(recorded) || recorded[i].Role != llm.RoleTool || recorded[i].ToolCallID != c.ID {
				break
			}
			turn.Results = append(turn.Results, agent.ToolResult{Content: agent.Summary(recorded[i].Content, workflows.ToolSummaryBytes)})
			i++
		}
		reuse.Turns = append(reuse.Turns, turn)
		if len(asked.ToolCalls) == 0 || len(turn.Results) < len(asked.ToolCalls) {
			break
		}
	}
	if len(reuse.Turns) == 0 {
		return reuse, 0 // nothing to go on from: the new attempt opens the conversation itself
	}
	// Only the last answer can become the run's reply: it keeps the text a
	// turn's activity would have returned.
	last := &reuse.Turns[len(reuse.Turns)-1]
	last.Answer.Content = agent.Summary(recorded[last.Seq].Content, workflows.MaxTurnTextBytes)
	return reuse, i
}

// copyTree copies the regular files and folders under src into dst (a
// missing src copies nothing). Files are copied, not linked: the new run
// may rewrite them, and the old run's artifacts must stay as they were.
func copyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, target)
		}
		return nil // symlinks and the like: the toolbox never makes them
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
