package workflows_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// deliveryEnv is a test environment with the workflows.Delivery activities mocked:
// attempt n answers answer(n).
type deliveryEnv struct {
	env  *testsuite.TestWorkflowEnvironment
	acts *activities.DeliveryActivities

	mu       sync.Mutex
	attempts []time.Duration // workflow time of each attempt since start
	finished []workflows.DeliveryFinishInput
}

func newDeliveryEnv(t *testing.T, answer func(n int) (*workflows.DeliveryAttemptResult, error)) *deliveryEnv {
	var suite testsuite.WorkflowTestSuite
	d := &deliveryEnv{env: suite.NewTestWorkflowEnvironment(), acts: &activities.DeliveryActivities{}}
	d.env.RegisterWorkflowWithOptions(workflows.Delivery, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	d.env.RegisterActivity(d.acts)
	start := d.env.Now()
	d.env.OnActivity(d.acts.DeliveryAttempt, mock.Anything, mock.Anything).Return(func(context.Context, workflows.DeliveryInput) (*workflows.DeliveryAttemptResult, error) {
		d.mu.Lock()
		d.attempts = append(d.attempts, d.env.Now().Sub(start))
		n := len(d.attempts)
		d.mu.Unlock()
		return answer(n)
	})
	d.env.OnActivity(d.acts.DeliveryFinish, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.DeliveryFinishInput) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.finished = append(d.finished, in)
		return nil
	})
	return d
}

func testMessage(r workflows.DeliveryRetry) workflows.DeliveryInput {
	return workflows.DeliveryInput{DeliveryID: "dlv_test", Channel: "webhook", Body: `{"text":"hi"}`, Source: "api", Retry: r}
}

func retryable(code int) error {
	return temporal.NewApplicationError("receiver answered "+strconv.Itoa(code), workflows.ErrTypeDeliveryAttemptFailed, code)
}

func TestDeliveryRetriesUntilReceiverAnswers(t *testing.T) {
	d := newDeliveryEnv(t, func(n int) (*workflows.DeliveryAttemptResult, error) {
		if n <= 3 {
			return nil, retryable(503)
		}
		return &workflows.DeliveryAttemptResult{Attempt: n, StatusCode: 200}, nil
	})
	d.env.ExecuteWorkflow(workflows.DeliveryWorkflowName, testMessage(workflows.DeliveryRetry{InitialInterval: time.Second, MaxInterval: time.Minute, RetryFor: time.Hour}))
	if err := d.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.DeliveryResult
	if err := d.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Status != models.DeliveryDelivered || res.Attempts != 4 || len(d.attempts) != 4 {
		t.Fatalf("result %+v after %d attempts", res, len(d.attempts))
	}
	// Exponential backoff: 1s, 2s, 4s between attempts.
	gaps := []time.Duration{d.attempts[1] - d.attempts[0], d.attempts[2] - d.attempts[1], d.attempts[3] - d.attempts[2]}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if gaps[i] < want || gaps[i] > want+time.Second {
			t.Errorf("gap %d: %v, want about %v", i, gaps[i], want)
		}
	}
	if len(d.finished) != 0 { // the successful attempt records the outcome
		t.Fatalf("finish %+v", d.finished)
	}
}

func TestDeliveryStopsAtNonRetryableAnswer(t *testing.T) {
	d := newDeliveryEnv(t, func(int) (*workflows.DeliveryAttemptResult, error) {
		return nil, temporal.NewNonRetryableApplicationError("https://h.example/ answered 404 Not Found", workflows.ErrTypeDeliveryRejected, nil, 404)
	})
	d.env.ExecuteWorkflow(workflows.DeliveryWorkflowName, testMessage(workflows.DeliveryRetry{RetryFor: time.Hour}))
	err := d.env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeDeliveryFailed {
		t.Fatalf("workflow error %v", err)
	}
	if len(d.attempts) != 1 || len(d.finished) != 1 || d.finished[0].Status != models.DeliveryFailed ||
		!strings.Contains(d.finished[0].Error, "404") {
		t.Fatalf("attempts %d, finish %+v", len(d.attempts), d.finished)
	}
}

func TestDeliveryGivesUpAfterRetryWindow(t *testing.T) {
	d := newDeliveryEnv(t, func(int) (*workflows.DeliveryAttemptResult, error) { return nil, retryable(500) })
	d.env.ExecuteWorkflow(workflows.DeliveryWorkflowName, testMessage(workflows.DeliveryRetry{InitialInterval: time.Second, MaxInterval: 10 * time.Second, RetryFor: 2 * time.Minute}))
	if d.env.GetWorkflowError() == nil {
		t.Fatal("no error")
	}
	last := d.attempts[len(d.attempts)-1]
	if len(d.attempts) < 8 || last > 2*time.Minute {
		t.Fatalf("%d attempts, last at %v", len(d.attempts), last)
	}
	if len(d.finished) != 1 || d.finished[0].Status != models.DeliveryFailed || !strings.Contains(d.finished[0].Error, "gave up after retrying for 2m0s") ||
		!strings.Contains(d.finished[0].Error, "500") {
		t.Fatalf("finish %+v", d.finished)
	}
}
