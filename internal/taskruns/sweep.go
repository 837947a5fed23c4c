package taskruns

import (
	"context"
	"errors"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/agentryhq/agentry/internal/sweeper"
	"github.com/agentryhq/agentry/models"
)

// SweepEvery is how often RunSweeper looks for runs whose start was lost.
const SweepEvery = time.Minute

// lostStartError is the error of a run whose workflow never started: its
// requester got no 202 (the answer comes after the start), so nothing
// promised was dropped, but the row must not stay queued.
const lostStartError = "the gateway stopped before the run's workflow started; request a new run"

// Sweep fails every run queued before `before` whose workflow never
// started (no Temporal run id, and no running workflow of its task): the
// process that inserted it died between the insert and the start (issue
// 18 item 5; a SIGKILL probe found such runs queued forever). Before,
// only the task's next run request repaired it. It returns how many it
// failed.
func (r *Service) Sweep(ctx context.Context, before time.Time) (int, error) {
	runs, err := r.Store.UnstartedRuns(ctx, before, 100)
	if err != nil {
		return 0, err
	}
	failed := 0
	for _, run := range runs {
		gone, err := r.workflowGone(ctx, &run)
		if err != nil {
			return failed, err // Temporal unavailable: the next sweep tries again
		}
		if !gone {
			continue // started; the start's answer was lost with the process
		}
		_, applied, err := r.Store.FinishRun(ctx, models.RunOutcome{RunID: run.ID, Status: models.RunFailed, Error: lostStartError})
		if err != nil {
			return failed, err
		}
		if applied {
			failed++
		}
	}
	if failed > 0 && r.Events != nil {
		r.Events.Notify()
	}
	return failed, nil
}

// RunSweeper sweeps once now and then every SweepEvery, leaving runs
// younger than staleStartAge to their request, until ctx ends. On SQLite
// the first sweep takes every run queued before this process built the
// service (one process owns the database: those are a dead process's);
// on PostgreSQL another live gateway
// may be between its insert and its start, so the first sweep keeps the
// same grace (failing such a run would leave its workflow running under a
// failed record).
func (r *Service) RunSweeper(ctx context.Context, log *slog.Logger) {
	sweeper.Run(ctx, log, "task run sweep", "failed the task runs whose workflow a crash kept from starting",
		SweepEvery, r.firstSweepGrace(time.Now()), staleStartAge, time.Now, r.Sweep)
}

// firstSweepGrace is how old a queued run must be for the first sweep to
// fail it (see RunSweeper).
func (r *Service) firstSweepGrace(now time.Time) time.Duration {
	if r.Store.DriverName() != models.DriverSQLite {
		return staleStartAge
	}
	if r.BuiltAt.IsZero() {
		return 0
	}
	return max(now.Sub(r.BuiltAt), 0)
}

// workflowGone reports whether no workflow of run's task is running (a
// long run goes on in a later execution of the same id, so the current
// one is asked).
func (r *Service) workflowGone(ctx context.Context, run *models.TaskRun) (bool, error) {
	desc, err := r.Client.DescribeWorkflowExecution(ctx, run.WorkflowID, run.TemporalRunID)
	if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		desc, err = r.Client.DescribeWorkflowExecution(ctx, run.WorkflowID, "")
	}
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return true, nil
	case err != nil:
		return false, err
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}
