package taskruns

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/models"
)

// stallDescribeTimeout bounds the Temporal call a run read makes.
const stallDescribeTimeout = 2 * time.Second

// StallReason says why an active run makes no progress: a step Temporal
// keeps retrying and its last error (for example a full database). It is
// read from Temporal, not from our database, because the database may be
// the very thing that cannot be written. "" when the run is not active or
// no step is failing.
func (r *Service) StallReason(ctx context.Context, run *models.TaskRun) string {
	if r == nil || r.Client == nil || run.WorkflowID == "" || (run.Status != models.RunRunning && run.Status != models.RunQueued) {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, stallDescribeTimeout)
	defer cancel()
	desc, err := r.Client.DescribeWorkflowExecution(ctx, run.WorkflowID, run.TemporalRunID)
	if err != nil {
		return ""
	}
	for _, pa := range desc.GetPendingActivities() {
		failure := pa.GetLastFailure()
		if pa.GetAttempt() < 2 || failure == nil {
			continue
		}
		msg := failure.GetMessage()
		if models.IsStorageFull(errors.New(msg)) {
			msg = models.ErrStorageFull.Error()
		}
		state := "retrying"
		if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED && pa.GetNextAttemptScheduleTime() != nil {
			state = "next attempt at " + pa.GetNextAttemptScheduleTime().AsTime().UTC().Format(time.RFC3339)
		}
		return scrub.String(fmt.Sprintf("step %s failed %d times (%s): %s", pa.GetActivityType().GetName(), pa.GetAttempt()-1, state, msg))
	}
	// A step Temporal does not list (the start and finish of a run are
	// local activities, retried inside a workflow task) may be the one
	// refused: every step writes, so a database refusing writes stalls the
	// run wherever it is.
	if r.Store != nil && r.Store.StorageFullRecently() {
		return "the run cannot record its progress: " + models.ErrStorageFull.Error()
	}
	return ""
}
