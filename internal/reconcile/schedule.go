package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/workflows"
)

// Scheduler keeps the reconciliation Schedule in step with the
// configuration and starts on-demand runs of the Reconcile workflow.
type Scheduler struct {
	Client    client.Client
	TaskQueue string
	Enabled   bool
	// Interval is costs.reconciliation.interval.
	Interval time.Duration
	Log      *slog.Logger
	// Service records on-demand runs before their first activity.
	Service *Service
}

// CatchupWindow is how late a firing missed while Temporal (or the whole
// installation) was down still runs when it is back: one interval, at
// least a minute. Older firings are dropped: each run covers the previous
// completed day at its start, so the next firing (or an on-demand run with
// a day) covers what was missed.
func (r *Scheduler) CatchupWindow() time.Duration { return max(r.Interval, time.Minute) }

func (r *Scheduler) action() *client.ScheduleWorkflowAction {
	id := workflows.ReconcileScheduleID(r.TaskQueue)
	return &client.ScheduleWorkflowAction{
		ID:                       id + "-run", // Temporal appends the fire time
		Workflow:                 workflows.ReconcileWorkflowName,
		Args:                     []any{workflows.ReconcileInput{Version: workflows.ReconcileInputVersion, Trigger: workflows.ReconcileTriggerSchedule}},
		TaskQueue:                r.TaskQueue,
		WorkflowExecutionTimeout: 2 * time.Hour,
	}
}

// Sync creates, updates or (when disabled) deletes the Schedule.
func (r *Scheduler) Sync(ctx context.Context) error {
	sc := r.Client.ScheduleClient()
	id := workflows.ReconcileScheduleID(r.TaskQueue)
	h := sc.GetHandle(ctx, id)
	desc, err := h.Describe(ctx)
	var nf *serviceerror.NotFound
	notFound := errors.As(err, &nf)
	if err != nil && !notFound {
		return fmt.Errorf("describe reconciliation schedule: %w", err)
	}
	if !r.Enabled {
		if notFound {
			return nil
		}
		if err := h.Delete(ctx); err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("delete reconciliation schedule: %w", err)
		}
		return nil
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: r.Interval}}}
	if notFound {
		_, err := sc.Create(ctx, client.ScheduleOptions{
			ID: id, Spec: spec, Action: r.action(),
			Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			CatchupWindow: r.CatchupWindow(),
			Note:          "costs.reconciliation: previous completed UTC day, every " + r.Interval.String(),
		})
		if err == nil || errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return nil
		}
		return fmt.Errorf("create reconciliation schedule: %w", err)
	}
	if ivs := desc.Schedule.Spec.Intervals; len(ivs) == 1 && ivs[0].Every == r.Interval &&
		desc.Schedule.Policy != nil && desc.Schedule.Policy.CatchupWindow == r.CatchupWindow() {
		return nil
	}
	err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		return &client.ScheduleUpdate{Schedule: &client.Schedule{
			Action: r.action(), Spec: &spec,
			Policy: &client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: r.CatchupWindow()},
			State:  &client.ScheduleState{Note: "costs.reconciliation: previous completed UTC day, every " + r.Interval.String()},
		}}, nil
	}})
	if err != nil {
		return fmt.Errorf("update reconciliation schedule: %w", err)
	}
	return nil
}

// Run syncs the Schedule now and retries every 10 s until it succeeds or
// ctx ends (Temporal may not be reachable yet).
func (r *Scheduler) Run(ctx context.Context) {
	for {
		err := r.Sync(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		if r.Log != nil {
			r.Log.Warn("reconciliation schedule not in sync; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// StartedRun is an on-demand run.
type StartedRun struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Day        string `json:"day"`
	Status     string `json:"status"`
}

// RunNow starts the Reconcile workflow for day (YYYY-MM-DD, a completed UTC
// day; empty: the previous one). A run of the same day still running is
// joined rather than duplicated. It fails with ErrInvalidDay for
// a bad day and ErrNotConfigured without providers.
func (r *Scheduler) RunNow(ctx context.Context, day string, now time.Time) (*StartedRun, error) {
	if day == "" {
		day = PreviousDay(now)
	}
	if err := CheckDay(day, now); err != nil {
		return nil, err
	}
	if len(r.Service.Providers()) == 0 {
		return nil, ErrNotConfigured
	}
	id := workflows.ReconcileWorkflowID(r.TaskQueue, day)
	run, err := r.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                r.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionTimeout: 2 * time.Hour,
		StaticSummary:            "reconcile " + day,
	}, workflows.ReconcileWorkflowName, workflows.ReconcileInput{Version: workflows.ReconcileInputVersion, Day: day, Trigger: workflows.ReconcileTriggerManual})
	if err != nil {
		return nil, fmt.Errorf("start reconciliation of %s: %w", day, err)
	}
	// Recorded now, so the run can be read at once; the workflow's first
	// activity finds it there.
	if _, err := r.Service.Begin(ctx, RunRef{RunID: run.GetRunID(), WorkflowID: id, Day: day, Trigger: workflows.ReconcileTriggerManual}); err != nil {
		return nil, err
	}
	return &StartedRun{WorkflowID: id, RunID: run.GetRunID(), Day: day, Status: "running"}, nil
}
