// Package taskruns starts and cancels workboard task runs: the client side
// of the TaskRun workflow (workflows/taskrun.go).
package taskruns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/internal/runprep"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// ErrTemporalUnavailable wraps failures to reach Temporal (HTTP 503).
var ErrTemporalUnavailable = fault.ErrTemporalUnavailable

// staleStartAge is how long a run may stay queued without a workflow
// before a new run request treats it as abandoned (the process that
// inserted it died before starting the workflow).
const staleStartAge = 2 * time.Minute

// Notifier wakes event subscribers after events were committed
// (*events.Bus).
type Notifier interface{ Notify() }

// Service starts and cancels task runs: the client side of TaskRun. The
// run row in the database and the workflow in Temporal are kept in
// agreement: the row is inserted first (the database refuses a second
// active run), then the workflow is started with the conflict policy FAIL
// (Temporal refuses a second running workflow of the task); when the start
// fails the row is removed again.
type Service struct {
	Client client.Client
	Store  models.TaskRunStore
	Agents *agentdef.Registry
	Router *llm.Router
	// Toolbox gives the agent's tool schemas (builtins and MCP).
	Toolbox *agent.Toolbox
	Config  *config.Loaded
	Events  Notifier
	// Log stores the run's snapshot (the resolved agent, by content hash).
	Log *runlog.Log
	// TaskQueue is the worker's queue (temporal.task_queue).
	TaskQueue string
	// Timeout overrides workflows.TaskRunTimeout (tests).
	Timeout time.Duration
	// WorkDir is the work directory of a run (activities.RunDir in the
	// artifact area): a retry copies the failed run's into its own. Nil:
	// nothing is copied.
	WorkDir func(taskID, runID int64) string
	// BuiltAt is when this process built the service, before its API
	// served: on SQLite the first sweep fails only runs queued before it
	// (the sweep starts once its singleton lease is taken, when this
	// process's own requests may already be between insert and start).
	BuiltAt time.Time
}

// Start requests a run of a task by its agent and returns the queued run.
// Errors: *models.NotFoundError (404), *models.ValidationError on agent_id
// (400: none set, unknown or disabled agent), chat errors for an agent
// whose model settings do not resolve, models.ErrRunActive (409),
// ErrTemporalUnavailable (503).
func (r *Service) Start(ctx context.Context, taskID int64, trigger string) (*models.TaskRun, error) {
	// Once begun, finish (or undo) the start even if the caller goes away.
	principal := auth.FromContext(ctx)
	ctx, cancel := context.WithTimeout(detached.Context(ctx), 30*time.Second)
	defer cancel()

	task, err := r.Store.GetTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if task.AgentID == "" {
		return nil, &models.ValidationError{Field: "agent_id", Msg: fmt.Sprintf("task %d has no agent_id; set one before starting a run", taskID)}
	}
	def, err := r.enabledAgent(task, task.AgentID)
	if err != nil {
		return nil, err
	}
	// The agent as resolved now is the run's snapshot, stored by content
	// hash: a later change of the agent file never changes this run (nor a
	// retry of it).
	prep, err := r.preparer().Prepare(ctx, runprep.Request{Agent: def, Who: principal, SkillInstructions: true, Delegates: true, UserText: TaskPrompt(task),
		MemorySource: fmt.Sprintf("task-%d", taskID)})
	var unresolved *runprep.ResolveError
	if errors.As(err, &unresolved) {
		return nil, unresolved.Err
	}
	if err != nil {
		return nil, err
	}
	snap, sha := prep.Snapshot, prep.SHA
	run, err := r.createRun(ctx, models.NewRun{TaskID: taskID, AgentID: def.ID, Trigger: trigger, WorkflowID: workflows.TaskRunWorkflowID(taskID),
		Snapshot: sha})
	if err != nil {
		return nil, err
	}
	return r.launch(ctx, task, def, run, snap, subject(principal), nil, func() error { return nil })
}

// preparer resolves and snapshots the agents of this service's runs.
func (r *Service) preparer() runprep.Preparer {
	return runprep.Preparer{Config: r.Config, Router: r.Router, Toolbox: r.Toolbox, Log: r.Log, Agents: r.Agents.Get}
}

// enabledAgent is the agent a run of task uses: it must exist and be
// enabled (400 on agent_id otherwise).
func (r *Service) enabledAgent(task *models.Task, agentID string) (*agentdef.Definition, error) {
	def, ok := r.Agents.Get(agentID)
	if !ok {
		return nil, &models.ValidationError{Field: "agent_id", Msg: fmt.Sprintf("task %d names agent %q, which does not exist", task.ID, agentID)}
	}
	if !def.IsEnabled() {
		return nil, &models.ValidationError{Field: "agent_id", Msg: fmt.Sprintf("agent %q is disabled", def.ID)}
	}
	return def, nil
}

// createRun inserts the queued run (409 while the task has an active run,
// unless that one turns out to be stale).
func (r *Service) createRun(ctx context.Context, nr models.NewRun) (*models.TaskRun, error) {
	run, err := r.Store.CreateRun(ctx, nr)
	if errors.Is(err, models.ErrRunActive) && r.repairStale(ctx, nr.TaskID) {
		run, err = r.Store.CreateRun(ctx, nr)
	}
	return run, err
}

func subject(p *auth.Principal) string {
	if p == nil {
		return "anonymous"
	}
	return p.Subject
}

// launch starts the workflow of the queued run. When that fails the run
// is removed again and undo reverts what the caller prepared for it.
func (r *Service) launch(ctx context.Context, task *models.Task, def *agentdef.Definition, run *models.TaskRun, snap workflows.RunSnapshot,
	who string, reuse *workflows.ReusedSteps, undo func() error) (*models.TaskRun, error) {
	taskID := task.ID
	in := workflows.TaskRunInput{
		Version: workflows.TaskRunInputVersion, TaskID: taskID, RunID: run.ID, Attempt: run.Attempt, AgentID: def.ID, Title: task.Title, Trigger: run.Trigger, Subject: who,
		DataClassification: def.LLM.DataClassification, Timeout: r.Timeout, Agent: snap.Agent.Outline(), Snapshot: run.Snapshot,
		Approvals: workflows.PolicyOf(def.Approvals), BudgetWait: r.Config.Costs.RunBudgetWait, Reuse: reuse,
		ToolTimeout: r.Config.Runtime.ToolTimeout, LocalFileTools: true, LocalLLMTurns: true,
	}
	if len(def.Peers) > 0 { // docs/teams.md: the run is the root of its tree
		id := models.TaskRunLedgerID(run.ID)
		in.Delegation = &workflows.Delegation{Peers: def.Peers, RunID: id, RootRunID: id, RootTaskID: taskID, RootTaskRunID: run.ID,
			Lineage: []string{def.ID}}
	}
	execTimeout := workflows.TaskRunExecutionTimeout
	if r.Timeout > 0 {
		execTimeout = r.Timeout + 5*time.Minute
	}
	// Time parked for budget does not count toward the run's bound; the
	// backstop leaves room for all of it.
	execTimeout += in.BudgetWait
	if len(in.Approvals.Tools) > 0 {
		// A run may park for people (each wait bounded by the approval
		// timeout, parked time not counted): no backstop could know how
		// long it may take; the workflow bounds every wait itself.
		execTimeout = 0
	}
	opts := client.StartWorkflowOptions{
		ID:                                       workflows.TaskRunWorkflowID(taskID),
		TaskQueue:                                r.taskQueue(),
		WorkflowExecutionTimeout:                 execTimeout,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// The gateway's own worker polls this queue: the server hands the
		// first workflow task back in the start response instead of
		// through a poll (one round trip and one matching hop fewer per run).
		EnableEagerStart: true,
		// The LLM turns are local activities (LocalLLMTurns): how soon a
		// cancel request and the deadline reach the workflow.
		WorkflowTaskTimeout: workflows.LocalTurnsWorkflowTaskTimeout,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SearchAttrTaskID.ValueSet(taskID), workflows.SearchAttrAgentID.ValueSet(def.ID), workflows.SearchAttrTrigger.ValueSet(run.Trigger)),
		StaticSummary: summary(task, def.ID, run.Attempt),
		StaticDetails: details(task, def.ID, snap.Agent),
	}
	we, err := r.Client.ExecuteWorkflow(ctx, opts, workflows.TaskRunWorkflowName, in)
	if err != nil {
		if derr := errors.Join(r.Store.DeleteQueuedRun(ctx, run.ID), undo()); derr != nil {
			err = errors.Join(err, derr)
		}
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			// The previous run's workflow is still closing (it records its
			// outcome just before it ends) or another gateway sharing the
			// cluster runs this task id.
			return nil, &models.ConflictError{Code: models.ErrRunActive.Code,
				Msg: fmt.Sprintf("task %d already has a running workflow (%s); try again when it has ended", taskID, opts.ID)}
		}
		return nil, fmt.Errorf("start run of task %d: %w: %w", taskID, ErrTemporalUnavailable, err)
	}
	if err := r.Store.SetRunTemporalID(ctx, run.ID, we.GetRunID()); err != nil {
		return nil, err
	}
	// The worker may already have marked the run running.
	return r.Store.RunByID(ctx, run.ID)
}

// NudgeBudgetWaits tells every run waiting for budget that the cost
// configuration changed (workflows.SignalCostsChanged): each tries its
// refused turn again at once instead of at its next timer. It returns how
// many runs were told; a run whose workflow is gone is skipped.
func (r *Service) NudgeBudgetWaits(ctx context.Context) (int, error) {
	return r.nudge(ctx, models.WaitingForBudget)
}

// NudgeCostCapWaits tells every run waiting for its cost cap that a cap
// changed (a task's max_cost_usd was patched): each tries its refused turn
// again at once, reading the cap anew. All of them, not only the patched
// task's: a run delegated to by another (a peer) counts its root's cap.
func (r *Service) NudgeCostCapWaits(ctx context.Context) (int, error) {
	return r.nudge(ctx, models.WaitingForCostCap)
}

func (r *Service) nudge(ctx context.Context, waitingFor string) (int, error) {
	runs, err := r.Store.RunsWaitingFor(ctx, waitingFor)
	if err != nil {
		return 0, err
	}
	ids := make([]string, 0, len(runs))
	for _, run := range runs {
		ids = append(ids, run.WorkflowID)
	}
	// Peer runs (child workflows of a task run or firing) park for the same
	// reasons and are told the same way.
	peers, err := r.Store.PeerRunsWaitingFor(ctx, waitingFor)
	if err != nil {
		return 0, err
	}
	for _, p := range peers {
		ids = append(ids, p.WorkflowID)
	}
	told := 0
	var errs []error
	for _, id := range ids {
		err := r.Client.SignalWorkflow(ctx, id, "", workflows.SignalCostsChanged, nil)
		var nf *serviceerror.NotFound
		switch {
		case err == nil:
			told++
		case errors.As(err, &nf):
		default:
			errs = append(errs, fmt.Errorf("signal run %s: %w", id, err))
		}
	}
	return told, errors.Join(errs...)
}

func (r *Service) taskQueue() string {
	if r.TaskQueue != "" {
		return r.TaskQueue
	}
	return workflows.DefaultTaskQueue
}

// repairStale fails the task's active run when its workflow is no longer
// running (the execution-timeout backstop ended it, or the process that
// queued it died before starting it), so a new run can start. It reports
// whether it repaired anything.
func (r *Service) repairStale(ctx context.Context, taskID int64) bool {
	active, err := r.Store.ActiveRun(ctx, taskID)
	if err != nil {
		return false
	}
	if active.TemporalRunID == "" && time.Since(active.CreatedAt) < staleStartAge {
		return false // its start is probably still in progress
	}
	if gone, err := r.workflowGone(ctx, active); err != nil || !gone {
		return false
	}
	_, applied, err := r.Store.FinishRun(ctx, models.RunOutcome{RunID: active.ID, Status: models.RunFailed,
		Error: "the run's workflow ended without recording an outcome (execution timeout or lost start)"})
	if err != nil {
		return false
	}
	if applied && r.Events != nil {
		r.Events.Notify()
	}
	return true
}

// Cancel asks a run's workflow to stop. Cancellation is asynchronous: the
// run is returned as it is now and becomes cancelled (task back to todo)
// once the workflow has stopped its current step. Errors: 404 for an
// unknown task or run (or a run of another task), models.ErrRunNotActive
// (409) for a run that already ended.
func (r *Service) Cancel(ctx context.Context, taskID, runID int64) (*models.TaskRun, error) {
	ctx, cancel := context.WithTimeout(detached.Context(ctx), 30*time.Second)
	defer cancel()
	run, err := r.Store.GetRun(ctx, taskID, runID)
	if err != nil {
		return nil, err
	}
	if !models.RunActive(run.Status) {
		return nil, &models.ConflictError{Code: models.ErrRunNotActive.Code, RunID: runID,
			Msg: fmt.Sprintf("run %d of task %d already ended (%s)", runID, taskID, run.Status)}
	}
	// The current execution of the workflow id, not the first one: a long
	// run continues as new (same id, later executions), and only the
	// active run of the task can be running under its id.
	err = r.Client.CancelWorkflow(ctx, run.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf) || isAlreadyClosed(err):
		// The workflow is gone: record the cancellation ourselves.
		if _, applied, ferr := r.Store.FinishRun(ctx, models.RunOutcome{RunID: runID, Status: models.RunCancelled, Error: "cancelled by request"}); ferr != nil {
			return nil, ferr
		} else if applied && r.Events != nil {
			r.Events.Notify()
		}
	case err != nil:
		return nil, fmt.Errorf("cancel run %d: %w: %w", runID, ErrTemporalUnavailable, err)
	}
	return r.Store.RunByID(ctx, runID)
}

func isAlreadyClosed(err error) bool {
	var fp *serviceerror.FailedPrecondition
	return errors.As(err, &fp) && strings.Contains(strings.ToLower(fp.Error()), "already completed")
}

// TaskPrompt is the user message a run sends: the task as a person would
// hand it over.
func TaskPrompt(t *models.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task #%d: %s\n", t.ID, t.Title)
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString("\n")
		b.WriteString(d)
		b.WriteString("\n")
	}
	var meta []string
	if t.Priority != "" && t.Priority != models.PriorityNormal {
		meta = append(meta, "priority: "+t.Priority)
	}
	if t.DueAt != nil {
		meta = append(meta, "due: "+t.DueAt.Format(time.RFC3339))
	}
	if tags := t.TagList(); len(tags) > 0 {
		meta = append(meta, "tags: "+strings.Join(tags, ", "))
	}
	if t.Owner != "" {
		meta = append(meta, "owner: "+t.Owner)
	}
	if len(meta) > 0 {
		b.WriteString("\n")
		b.WriteString(strings.Join(meta, "\n"))
		b.WriteString("\n")
	}
	return b.String()
}

// summary is the one line the Temporal Web UI shows for the run.
func summary(t *models.Task, agentID string, attempt int) string {
	title := t.Title
	if r := []rune(title); len(r) > 120 {
		title = string(r[:120]) + "…"
	}
	return fmt.Sprintf("Task %d: %s (agent %s, attempt %d)", t.ID, title, agentID, attempt)
}

// details is the markdown the Web UI shows under the summary.
func details(t *models.Task, agentID string, set agent.Input) string {
	desc := t.Description
	if r := []rune(desc); len(r) > 2000 {
		desc = string(r[:2000]) + "…"
	}
	return fmt.Sprintf("**%s**\n\nAgent: `%s` (%s/%s), priority %s\n\n%s", t.Title, agentID, set.Provider, set.Model, t.Priority, desc)
}
