package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

type scheduledEnv struct {
	env  *testsuite.TestWorkflowEnvironment
	acts *activities.ScheduledActivities

	mu        sync.Mutex
	records   []workflows.ScheduledRecordInput
	delivered []workflows.DeliveryInput
	childIDs  []string
}

func newScheduledEnv(t *testing.T, run func() (*workflows.ScheduledRunResult, error)) *scheduledEnv {
	var suite testsuite.WorkflowTestSuite
	s := &scheduledEnv{env: suite.NewTestWorkflowEnvironment(), acts: &activities.ScheduledActivities{}}
	s.env.RegisterWorkflowWithOptions(workflows.ScheduledAgent, workflow.RegisterOptions{Name: workflows.ScheduledAgentWorkflowName})
	s.env.RegisterWorkflowWithOptions(workflows.Delivery, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	s.env.RegisterActivity(s.acts)
	// These tests cover firings started before the run engine (one
	// activity); firing_test.go covers the turn-by-turn ones.
	s.env.OnGetVersion("firing-per-turn", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	s.env.OnActivity(s.acts.ScheduledAgentRun, mock.Anything, mock.Anything).Return(func(context.Context, workflows.ScheduledAgentInput) (*workflows.ScheduledRunResult, error) {
		return run()
	})
	s.env.OnActivity(s.acts.ScheduledAgentRecord, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.ScheduledRecordInput) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.records = append(s.records, in)
		return nil
	}).Maybe()
	s.env.OnWorkflow(workflows.DeliveryWorkflowName, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, msg workflows.DeliveryInput) (*workflows.DeliveryResult, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.delivered = append(s.delivered, msg)
		s.childIDs = append(s.childIDs, workflow.GetInfo(ctx).WorkflowExecution.ID)
		return &workflows.DeliveryResult{DeliveryID: msg.DeliveryID, Status: models.DeliveryDelivered}, nil
	}).Maybe()
	return s
}

var firing = workflows.ScheduledAgentInput{AgentID: "reporter", ScheduleID: "agentry:schedule:reporter", Trigger: workflows.TriggerCron}

func TestScheduledAgentHandsReplyToDelivery(t *testing.T) {
	msg := workflows.DeliveryInput{DeliveryID: "dlv_abc", Channel: "webhook", Body: `{"text":"report"}`, Source: delivery.SourceSchedule}
	s := newScheduledEnv(t, func() (*workflows.ScheduledRunResult, error) {
		return &workflows.ScheduledRunResult{Status: models.ScheduleRunSucceeded, Delivery: &msg}, nil
	})
	s.env.ExecuteWorkflow(workflows.ScheduledAgentWorkflowName, firing)
	if err := s.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.ScheduledAgentResult
	if err := s.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != models.ScheduleRunSucceeded || res.DeliveryID != "dlv_abc" {
		t.Fatalf("result %+v", res)
	}
	if len(s.delivered) != 1 || s.delivered[0].Body != msg.Body || s.childIDs[0] != workflows.DeliveryWorkflowID("dlv_abc") {
		t.Fatalf("delivered %+v as %v", s.delivered, s.childIDs)
	}
	if len(s.records) != 0 {
		t.Fatalf("unexpected records %+v", s.records)
	}
}

func TestScheduledAgentSkippedDeliversNothing(t *testing.T) {
	s := newScheduledEnv(t, func() (*workflows.ScheduledRunResult, error) {
		return &workflows.ScheduledRunResult{Status: models.ScheduleRunSkipped, Error: "cost admission refused the run: budget", Code: "budget_exceeded"}, nil
	})
	s.env.ExecuteWorkflow(workflows.ScheduledAgentWorkflowName, firing)
	if err := s.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.ScheduledAgentResult
	_ = s.env.GetWorkflowResult(&res)
	if res.Status != models.ScheduleRunSkipped || len(s.delivered) != 0 {
		t.Fatalf("result %+v, delivered %d", res, len(s.delivered))
	}
}

func TestScheduledAgentRunFailureIsRecorded(t *testing.T) {
	s := newScheduledEnv(t, func() (*workflows.ScheduledRunResult, error) {
		return nil, errors.New("worker lost")
	})
	s.env.ExecuteWorkflow(workflows.ScheduledAgentWorkflowName, firing)
	if s.env.GetWorkflowError() == nil {
		t.Fatal("no workflow error")
	}
	if len(s.records) != 1 || s.records[0].Status != models.ScheduleRunFailed || s.records[0].AgentID != "reporter" || len(s.delivered) != 0 {
		t.Fatalf("records %+v", s.records)
	}
}
