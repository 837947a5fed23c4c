package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

type webhookRunEnv struct {
	env       *testsuite.TestWorkflowEnvironment
	acts      *activities.WebhookRunActivities
	prep      *workflows.WebhookPrepared
	mu        sync.Mutex
	turns     int
	finished  []workflows.WebhookFinishInput
	delivered []workflows.DeliveryInput
}

func newWebhookRunEnv(prepErr error, turn func(workflows.LLMTurnInput) (*llm.Response, error)) *webhookRunEnv {
	var suite testsuite.WorkflowTestSuite
	w := &webhookRunEnv{env: suite.NewTestWorkflowEnvironment(), acts: &activities.WebhookRunActivities{}}
	w.env.RegisterWorkflowWithOptions(workflows.WebhookRun, workflow.RegisterOptions{Name: workflows.WebhookRunWorkflowName})
	w.env.RegisterWorkflowWithOptions(workflows.Delivery, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	w.env.RegisterActivity(w.acts)
	prep := &workflows.WebhookPrepared{Run: workflows.RunRef{WorkflowID: "webhook-wr_1", Attempt: 1, AgentID: "ops", Snapshot: "s"},
		Agent: agent.Input{Provider: "ollama", Model: "m", UserText: "disk full", MaxTurns: 4}}
	if prepErr != nil {
		prep = nil
	}
	w.prep = prep
	w.env.OnActivity(w.acts.WebhookRunPrepare, mock.Anything, mock.Anything).Return(prep, prepErr)
	w.env.OnActivity(w.acts.WebhookLLMTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		w.mu.Lock()
		w.turns++
		w.mu.Unlock()
		return turn(in)
	}).Maybe()
	w.env.OnActivity(w.acts.WebhookTool, mock.Anything, mock.Anything).Return(agent.ToolResult{Content: "ok"}, nil).Maybe()
	w.env.OnActivity(w.acts.WebhookRunFinish, mock.Anything, mock.Anything).Return(func(_ context.Context, fin workflows.WebhookFinishInput) (*workflows.WebhookRunResult, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.finished = append(w.finished, fin)
		out := &workflows.WebhookRunResult{Status: fin.Status, Error: fin.Error}
		if fin.Status == models.WebhookRunSucceeded {
			out.Delivery = &workflows.DeliveryInput{DeliveryID: activities.WebhookDeliveryID(fin.In.RunID), Channel: "webhook"}
		}
		return out, nil
	}).Maybe()
	w.env.OnWorkflow(workflows.DeliveryWorkflowName, mock.Anything, mock.Anything).Return(func(_ workflow.Context, msg workflows.DeliveryInput) (*workflows.DeliveryResult, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.delivered = append(w.delivered, msg)
		return &workflows.DeliveryResult{DeliveryID: msg.DeliveryID, Status: models.DeliveryDelivered}, nil
	}).Maybe()
	return w
}

var asyncCall = workflows.WebhookRunInput{RunID: "wr_1", AgentID: "ops", Subject: "api-key", UserID: "ana", SessionID: "webhook-ops-A-9", Text: "disk full"}

func TestWebhookRunStoresTheReplyAndDeliversIt(t *testing.T) {
	// Runs prepared before LocalLLMTurns (LLM activities) and since (LLM
	// turns as local activities) run the same steps.
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local LLM turns %v", local), func(t *testing.T) {
			w := newWebhookRunEnv(nil, func(in workflows.LLMTurnInput) (*llm.Response, error) {
				if in.Turn == 1 {
					return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_file"}}}, nil
				}
				return &llm.Response{Content: "Cleaned up."}, nil
			})
			w.prep.LocalLLMTurns = local
			localTurns := 0
			w.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				if info.ActivityType.Name == workflows.ActivityWebhookLLMTurn {
					localTurns++
				}
			})
			w.env.ExecuteWorkflow(workflows.WebhookRunWorkflowName, asyncCall)
			if err := w.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			want := activities.WebhookDeliveryID("wr_1")
			if w.turns != 2 || len(w.finished) != 1 || w.finished[0].Status != models.WebhookRunSucceeded || w.finished[0].Turns != 2 {
				t.Fatalf("turns %d finished %+v", w.turns, w.finished)
			}
			if len(w.delivered) != 1 || w.delivered[0].DeliveryID != want {
				t.Fatalf("delivered %+v", w.delivered)
			}
			if want := map[bool]int{false: 0, true: 2}[local]; localTurns != want {
				t.Fatalf("%d of 2 turns ran as local activities, want %d", localTurns, want)
			}
		})
	}
}

// A run that cannot start (agent gone) and one whose turn is refused are
// recorded failed with the reason; nothing is delivered.
func TestWebhookRunFailuresAreRecorded(t *testing.T) {
	w := newWebhookRunEnv(temporal.NewNonRetryableApplicationError("agent ops is gone or disabled", workflows.ErrTypeRunGone, nil),
		func(workflows.LLMTurnInput) (*llm.Response, error) { return nil, errors.New("not reached") })
	w.env.ExecuteWorkflow(workflows.WebhookRunWorkflowName, asyncCall)
	if w.env.GetWorkflowError() == nil || w.turns != 0 || len(w.finished) != 1 || w.finished[0].Error != "agent ops is gone or disabled" || len(w.delivered) != 0 {
		t.Fatalf("err %v turns %d finished %+v", w.env.GetWorkflowError(), w.turns, w.finished)
	}
	w = newWebhookRunEnv(nil, func(workflows.LLMTurnInput) (*llm.Response, error) {
		return nil, temporal.NewNonRetryableApplicationError("HTTP 400: bad model", workflows.ErrTypeLLMRejected, nil)
	})
	w.env.ExecuteWorkflow(workflows.WebhookRunWorkflowName, asyncCall)
	if w.env.GetWorkflowError() == nil || len(w.finished) != 1 || w.finished[0].Status != models.WebhookRunFailed || len(w.delivered) != 0 {
		t.Fatalf("err %v finished %+v", w.env.GetWorkflowError(), w.finished)
	}
}
