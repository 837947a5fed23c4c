// Package activities holds Agentry's Temporal activities: structs that hold
// their dependencies (store, LLM router, toolbox), whose methods are the
// activities. The worker registers each struct once; tests build them with
// real or fake dependencies and call the methods directly.
package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// DefaultHeartbeatInterval is how often long activities heartbeat. The
// workflow's heartbeat timeout must be well above it: after a worker
// crash, Temporal retries an in-flight activity once its heartbeat times
// out.
const DefaultHeartbeatInterval = 3 * time.Second

// Notifier wakes event subscribers after events were committed
// (*events.Bus).
type Notifier interface{ Notify() }

// TaskRunActivities are the activities of the TaskRun workflow.
type TaskRunActivities struct {
	Store   *models.Store
	Router  *llm.Router
	Toolbox *agent.Toolbox
	Events  Notifier
	// ArtifactsDir is the workspace's artifact area; each run works in
	// ArtifactsDir/<task id>/<run id> and artifact paths never leave it.
	ArtifactsDir string
	// Workspace is the workspace root (ledger attribution).
	Workspace string
	// HeartbeatInterval overrides DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
}

// CallID is the durable id of a run's LLM call for one turn: built from
// the workflow id, the attempt and the turn, so a retried activity repeats
// the same id and the ledger counts the call once.
func CallID(ref workflows.RunRef, turn int) string {
	return fmt.Sprintf("%s-a%d-t%d", ref.WorkflowID, ref.Attempt, turn)
}

// RunDir is the work directory of a run.
func RunDir(artifactsDir string, taskID, runID int64) string {
	return filepath.Join(artifactsDir, strconv.FormatInt(taskID, 10), strconv.FormatInt(runID, 10))
}

// TaskRunStart marks the run running (task running, run.started event).
func (a *TaskRunActivities) TaskRunStart(ctx context.Context, ref workflows.RunRef) error {
	_, err := a.Store.MarkRunStarted(ctx, ref.RunID)
	if errors.Is(err, models.ErrNotFound) || errors.Is(err, models.ErrRunNotActive) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return fmt.Errorf("start run %d: %w", ref.RunID, err)
	}
	a.notify()
	return nil
}

// TaskRunFinish records the run's outcome (run and task status, terminal
// event). Repeating it changes nothing.
func (a *TaskRunActivities) TaskRunFinish(ctx context.Context, o models.RunOutcome) error {
	_, applied, err := a.Store.FinishRun(ctx, o)
	if errors.Is(err, models.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return fmt.Errorf("finish run %d: %w", o.RunID, err)
	}
	if applied {
		a.notify()
	}
	return nil
}

// TaskRunLLMTurn makes one LLM call through the router (admission and
// settlement included) with a stable call id.
func (a *TaskRunActivities) TaskRunLLMTurn(ctx context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
	stop := a.heartbeat(ctx)
	defer stop()
	ref := in.Run
	call := &llm.Call{
		Provider: in.Turn.Provider,
		Model:    in.Turn.Request.Model,
		Request:  in.Turn.Request,
		Meta: llm.CallMeta{
			CallID:             CallID(ref, in.Turn.Turn),
			Subject:            ref.Subject,
			Workspace:          a.Workspace,
			AgentID:            ref.AgentID,
			SessionID:          ref.WorkflowID,
			RunID:              models.TaskRunLedgerID(ref.RunID),
			Source:             llm.SourceTask,
			Trigger:            ref.Trigger,
			DataClassification: ref.DataClassification,
		},
	}
	resp, err := a.Router.Do(ctx, call)
	if err == nil {
		return resp, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // cancelled or timed out by Temporal
	}
	if llm.IsRetryable(err) {
		return nil, temporal.NewApplicationError(err.Error(), workflows.ErrTypeProvider)
	}
	// A rate limit, quota window or open breaker clears with time: retry
	// when governance says it may succeed (same call id, so one ledger row).
	var rej *costs.Rejection
	if errors.As(err, &rej) && rej.RetryAfter > 0 {
		return nil, temporal.NewApplicationErrorWithOptions(err.Error(), workflows.ErrTypeCostThrottled, temporal.ApplicationErrorOptions{NextRetryDelay: rej.RetryAfter})
	}
	return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeLLMRejected, nil)
}

// TaskRunTool runs one tool call in the run's work directory and attaches
// the files it wrote to the task (artifact record + run.artifact event,
// once per tool call even when this activity is retried).
func (a *TaskRunActivities) TaskRunTool(ctx context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
	stop := a.heartbeat(ctx)
	defer stop()
	ref := in.Run
	dir := RunDir(a.ArtifactsDir, ref.TaskID, ref.RunID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agent.ToolResult{}, fmt.Errorf("create work directory of run %d: %w", ref.RunID, err)
	}
	res, err := a.Toolbox.Execute(ctx, dir, in.Builtins, in.Invocation.Call)
	if err != nil {
		return agent.ToolResult{}, err
	}
	fresh := false
	for _, f := range res.Files {
		rec, err := a.recordArtifact(ctx, ref, dir, in.Invocation, f)
		if err != nil {
			return agent.ToolResult{}, err
		}
		fresh = fresh || rec
	}
	if fresh {
		a.notify()
	}
	return res, nil
}

func (a *TaskRunActivities) recordArtifact(ctx context.Context, ref workflows.RunRef, dir string, inv agent.ToolInvocation, f agent.ProducedFile) (bool, error) {
	area, err := filepath.EvalSymlinks(a.ArtifactsDir)
	if err != nil {
		return false, fmt.Errorf("artifact area: %w", err)
	}
	path, err := filepath.EvalSymlinks(f.Path)
	if err != nil {
		return false, fmt.Errorf("artifact %s: %w", f.Path, err)
	}
	if !Inside(area, path) {
		// The toolbox confines writes to the work directory, so this is
		// a bug or a race with a symlink: never record such a path.
		return false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %s wrote %s, outside the artifact area", f.Tool, f.Path), workflows.ErrTypeArtifactOutsideArea, nil)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, fmt.Errorf("work directory: %w", err)
	}
	name, err := filepath.Rel(realDir, path)
	if err != nil || strings.HasPrefix(name, "..") {
		name = filepath.Base(path)
	}
	size := f.SizeBytes
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	_, fresh, err := a.Store.RecordArtifact(ctx, models.NewArtifact{
		RunID: ref.RunID, Path: path, Name: filepath.ToSlash(name), SizeBytes: size, Tool: f.Tool,
		DedupeKey: fmt.Sprintf("run.artifact:%d:t%d:%s:%s", ref.RunID, inv.Turn, inv.Call.ID, path),
	})
	if errors.Is(err, models.ErrNotFound) {
		return false, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return false, fmt.Errorf("record artifact %s: %w", name, err)
	}
	return fresh, nil
}

// Inside reports whether path is root or below it (both already cleaned
// and free of symlinks).
func Inside(root, path string) bool {
	root, path = filepath.Clean(root), filepath.Clean(path)
	return path == root || strings.HasPrefix(path, root+string(filepath.Separator))
}

func (a *TaskRunActivities) notify() {
	if a.Events != nil {
		a.Events.Notify()
	}
}

// heartbeat reports liveness while a long call runs, so Temporal notices a
// crashed worker after the heartbeat timeout (not the whole start-to-close
// timeout) and delivers cancellation to the call. Outside an activity (unit
// tests) it does nothing.
func (a *TaskRunActivities) heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	every := a.HeartbeatInterval
	if every <= 0 {
		every = DefaultHeartbeatInterval
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
