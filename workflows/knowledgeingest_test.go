package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/models"
	. "github.com/agentryhq/agentry/workflows"
)

type ingestSteps struct {
	batches  []int
	callIDs  []string
	finished []KnowledgeFinishInput
	waits    []string
	publish  int
}

// knowledgeEnv mocks the steps: chunks chunks in batches of 10; refuse
// says whether batch b is refused for budget at its attempt n (1-based).
func knowledgeEnv(t *testing.T, prep KnowledgePrepareResult, prepErr error, refuse func(b, n int) bool) (*testsuite.TestWorkflowEnvironment, *ingestSteps) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts := &activities.KnowledgeActivities{}
	env.RegisterWorkflowWithOptions(KnowledgeIngest, workflow.RegisterOptions{Name: KnowledgeIngestWorkflowName})
	env.RegisterActivity(acts)
	st := &ingestSteps{}
	attempts := map[int]int{}
	env.OnActivity(acts.KnowledgePrepare, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in KnowledgeStep) (KnowledgePrepareResult, error) { return prep, prepErr })
	env.OnActivity(acts.KnowledgeEmbedBatch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in KnowledgeBatchInput) error {
			attempts[in.Batch]++
			if refuse != nil && refuse(in.Batch, attempts[in.Batch]) {
				return temporal.NewNonRetryableApplicationError("budget exhausted", ErrTypeCostRejected, nil, "budget_exceeded")
			}
			st.batches = append(st.batches, in.Batch)
			st.callIDs = append(st.callIDs, in.CallID)
			return nil
		})
	env.OnActivity(acts.KnowledgePublish, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in KnowledgeBatchInput) error { st.publish++; return nil })
	env.OnActivity(acts.KnowledgeFinish, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in KnowledgeFinishInput) error {
			st.finished = append(st.finished, in)
			return nil
		})
	env.OnActivity(acts.KnowledgeWait, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in KnowledgeWaitInput) error {
			st.waits = append(st.waits, in.WaitingFor)
			return nil
		})
	return env, st
}

func TestKnowledgeIngestEmbedsEveryBatchThenPublishes(t *testing.T) {
	env, st := knowledgeEnv(t, KnowledgePrepareResult{Version: "v1", Chunks: 25, BatchSize: 10}, nil, nil)
	env.ExecuteWorkflow(KnowledgeIngestWorkflowName, KnowledgeIngestInput{Document: "kb-1"})
	var res KnowledgeIngestResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != models.KnowledgeReady || res.Chunks != 25 || st.publish != 1 || len(st.finished) != 0 {
		t.Fatalf("result %+v, publish %d, finished %+v", res, st.publish, st.finished)
	}
	if len(st.batches) != 3 || st.batches[2] != 2 {
		t.Fatalf("batches = %v", st.batches)
	}
	seen := map[string]bool{}
	for _, id := range st.callIDs {
		if seen[id] || !strings.HasSuffix(id, "/batch-"+string(rune('0'+len(seen)))) {
			t.Fatalf("call ids %v are not one stable id per batch", st.callIDs)
		}
		seen[id] = true
	}
}

func TestKnowledgeIngestUnchangedEmbedsNothing(t *testing.T) {
	env, st := knowledgeEnv(t, KnowledgePrepareResult{Unchanged: true, Version: "v1", Chunks: 25, BatchSize: 10}, nil, nil)
	env.ExecuteWorkflow(KnowledgeIngestWorkflowName, KnowledgeIngestInput{Document: "kb-1"})
	var res KnowledgeIngestResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !res.Unchanged || res.Status != models.KnowledgeReady || len(st.batches) != 0 || st.publish != 0 ||
		len(st.finished) != 1 || !st.finished[0].Unchanged {
		t.Fatalf("result %+v, steps %+v", res, st)
	}
}

func TestKnowledgeIngestRefusedDocumentIsFailedWithTheReason(t *testing.T) {
	env, st := knowledgeEnv(t, KnowledgePrepareResult{}, temporal.NewNonRetryableApplicationError("unsupported file type \".exe\"", ErrTypeKnowledgeRefused, nil), nil)
	env.ExecuteWorkflow(KnowledgeIngestWorkflowName, KnowledgeIngestInput{Document: "kb-1"})
	var res KnowledgeIngestResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != models.KnowledgeFailed || len(st.finished) != 1 || !strings.Contains(st.finished[0].Error, "unsupported file type") {
		t.Fatalf("result %+v, finished %+v", res, st.finished)
	}
}

// A hard budget refusing batch 1 parks the ingestion; the costs-changed
// signal (the budget raised) resumes it at batch 1, with the same call id.
func TestKnowledgeIngestWaitsForBudgetAndResumes(t *testing.T) {
	env, st := knowledgeEnv(t, KnowledgePrepareResult{Version: "v1", Chunks: 30, BatchSize: 10}, nil,
		func(b, n int) bool { return b == 1 && n == 1 })
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalCostsChanged, nil) }, time.Second)
	env.ExecuteWorkflow(KnowledgeIngestWorkflowName, KnowledgeIngestInput{Document: "kb-1", BudgetWait: time.Hour})
	var res KnowledgeIngestResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != models.KnowledgeReady || st.publish != 1 {
		t.Fatalf("result %+v", res)
	}
	if strings.Join(st.waits, ",") != "budget," {
		t.Fatalf("waits = %q, want a park then a resume", st.waits)
	}
	if len(st.batches) != 3 || st.batches[1] != 1 || len(st.callIDs) != 3 || !strings.HasSuffix(st.callIDs[1], "/batch-1") {
		t.Fatalf("batches %v call ids %v", st.batches, st.callIDs)
	}
}

// Without a wait allowance the refusal fails the document; with one that
// runs out, too, after waiting.
func TestKnowledgeIngestBudgetWaitIsBounded(t *testing.T) {
	for _, wait := range []time.Duration{0, 3 * time.Minute} {
		env, st := knowledgeEnv(t, KnowledgePrepareResult{Version: "v1", Chunks: 30, BatchSize: 10}, nil,
			func(b, n int) bool { return b == 1 })
		env.ExecuteWorkflow(KnowledgeIngestWorkflowName, KnowledgeIngestInput{Document: "kb-1", BudgetWait: wait})
		var res KnowledgeIngestResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.Status != models.KnowledgeFailed || st.publish != 0 || len(st.finished) != 1 || !strings.Contains(st.finished[0].Error, "budget") {
			t.Fatalf("wait %s: result %+v finished %+v", wait, res, st.finished)
		}
	}
}
