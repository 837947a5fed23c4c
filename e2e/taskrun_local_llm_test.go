package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// TestTaskRunLocalLLMTurnEndsOnDeadlineAndCancel: an LLM turn that runs as
// a local activity (LocalLLMTurns) holds the workflow task while it runs,
// so the run's deadline and a cancel request reach the workflow only when
// the SDK renews that task (at 80 % of LocalTurnsWorkflowTaskTimeout). On the
// real server both still end a turn that never answers: the step's context
// is cancelled and the outcome recorded, a cancel within one renewal, the
// deadline within two (its timer is created by the first). The workflow
// test environment cannot show this (it does not move its clock while a
// local activity runs).
func TestTaskRunLocalLLMTurnEndsOnDeadlineAndCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the embedded Temporal server")
	}
	t.Parallel()
	c, err := client.Dial(client.Options{HostPort: gatewaytest.SharedTemporal(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := fmt.Sprintf("local-llm-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.TaskRun, workflow.RegisterOptions{Name: workflows.TaskRunWorkflowName})
	cancelled := make(chan int64, 2)
	outcomes := make(chan models.RunOutcome, 2)
	started := make(chan int64, 2)
	w.RegisterActivityWithOptions(func(context.Context, workflows.RunRef) error { return nil },
		activity.RegisterOptions{Name: workflows.ActivityTaskRunStart})
	w.RegisterActivityWithOptions(func(_ context.Context, o models.RunOutcome) error { outcomes <- o; return nil },
		activity.RegisterOptions{Name: workflows.ActivityTaskRunFinish})
	// The model never answers; the step hands back only when cancelled.
	w.RegisterActivityWithOptions(func(ctx context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		if !activity.GetInfo(ctx).IsLocalActivity {
			return nil, errors.New("the LLM turn ran as an activity, want a local activity")
		}
		started <- in.Run.RunID
		<-ctx.Done()
		cancelled <- in.Run.RunID
		return nil, ctx.Err()
	}, activity.RegisterOptions{Name: workflows.ActivityTaskRunLLMTurn})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	run := func(runID int64, timeout time.Duration) client.WorkflowRun {
		in := workflows.TaskRunInput{Version: workflows.TaskRunInputVersion, TaskID: runID, RunID: runID, Attempt: 1, AgentID: "writer",
			Trigger: workflows.TriggerAPI, Subject: "test", Timeout: timeout, LocalFileTools: true, LocalLLMTurns: true,
			Agent: agent.Input{Provider: "ollama", Model: "m", UserText: "never answered", MaxTurns: 2}.Outline()}
		wr, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: fmt.Sprintf("%s-%d", queue, runID), TaskQueue: queue, WorkflowExecutionTimeout: 2 * time.Minute,
			WorkflowTaskTimeout: workflows.LocalTurnsWorkflowTaskTimeout}, workflows.TaskRunWorkflowName, in)
		if err != nil {
			t.Fatal(err)
		}
		return wr
	}
	// Bound: two renewals (8 s) after the event, and slack for a loaded
	// machine.
	const within = 30 * time.Second
	expect := func(what string, runID int64, check func(models.RunOutcome) bool) {
		t.Helper()
		select {
		case id := <-cancelled:
			if id != runID {
				t.Fatalf("%s: run %d's turn was cancelled, want run %d", what, id, runID)
			}
		case <-time.After(within):
			t.Fatalf("%s: the local LLM turn was not cancelled within %s", what, within)
		}
		select {
		case o := <-outcomes:
			if o.RunID != runID || !check(o) {
				t.Fatalf("%s: outcome %+v", what, o)
			}
		case <-time.After(within):
			t.Fatalf("%s: no outcome recorded within %s", what, within)
		}
	}

	begun := time.Now()
	run(1, 2*time.Second)
	<-started
	expect("deadline", 1, func(o models.RunOutcome) bool { return o.Status == models.RunFailed && o.TimedOut })
	t.Logf("a 2 s run bound ended a never-answered local turn after %s", time.Since(begun).Round(time.Millisecond))

	wr := run(2, time.Hour)
	<-started
	begun = time.Now()
	if err := c.CancelWorkflow(context.Background(), wr.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	expect("cancel", 2, func(o models.RunOutcome) bool { return o.Status == models.RunCancelled })
	t.Logf("a cancel request ended a never-answered local turn after %s", time.Since(begun).Round(time.Millisecond))
}
