package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// channelTurnEnv runs ChannelTurn with its activities mocked: the reply is
// split in parts by ChannelTurnFinish; sends and records are kept.
type channelTurnEnv struct {
	env     *testsuite.TestWorkflowEnvironment
	acts    *activities.ChannelActivities
	mu      sync.Mutex
	sends   []workflows.ChannelSendInput
	records []workflows.ChannelRecordInput
	fins    []workflows.ChannelFinishInput
}

var channelMsg = workflows.ChannelMessage{ChannelID: "telegram", AgentID: "helper", MessageID: "77", ChatID: "1001", UserID: "1001",
	Text: "hello", ReplyTo: "9"}

func newChannelTurnEnv(turn func(workflows.LLMTurnInput) (*llm.Response, error), send func(n int) error) *channelTurnEnv {
	var suite testsuite.WorkflowTestSuite
	w := &channelTurnEnv{env: suite.NewTestWorkflowEnvironment(), acts: &activities.ChannelActivities{}}
	w.env.RegisterWorkflowWithOptions(workflows.ChannelTurn, workflow.RegisterOptions{Name: workflows.ChannelTurnWorkflowName})
	w.env.RegisterActivity(w.acts)
	prep := &workflows.ChannelPrepared{Run: workflows.RunRef{WorkflowID: workflows.ChannelTurnWorkflowID("telegram", "77"), Attempt: 1,
		AgentID: "helper", Trigger: "channel", Snapshot: "s", SessionID: "channel-telegram-x"},
		Agent: agent.Input{Provider: "ollama", Model: "m", UserText: "hello", MaxTurns: 4}, SessionID: "channel-telegram-x"}
	w.env.OnActivity(w.acts.ChannelTurnPrepare, mock.Anything, mock.Anything).Return(prep, nil)
	w.env.OnActivity(w.acts.ChannelLLMTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		return turn(in)
	}).Maybe()
	w.env.OnActivity(w.acts.ChannelTurnFinish, mock.Anything, mock.Anything).Return(func(_ context.Context, fin workflows.ChannelFinishInput) (*workflows.ChannelFinished, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.fins = append(w.fins, fin)
		if fin.Failed {
			return &workflows.ChannelFinished{Parts: []string{"Sorry, I could not answer that."}}, nil
		}
		return &workflows.ChannelFinished{Parts: []string{"part one", "part two"}}, nil
	})
	attempts := 0
	w.env.OnActivity(w.acts.ChannelSend, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.ChannelSendInput) (*workflows.ChannelSent, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		attempts++
		if err := send(attempts); err != nil {
			return nil, err
		}
		w.sends = append(w.sends, in)
		return &workflows.ChannelSent{PlatformID: fmt.Sprint(100 + len(w.sends))}, nil
	})
	w.env.OnActivity(w.acts.ChannelRecord, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.ChannelRecordInput) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.records = append(w.records, in)
		return nil
	})
	return w
}

func answer(text string) func(workflows.LLMTurnInput) (*llm.Response, error) {
	return func(workflows.LLMTurnInput) (*llm.Response, error) {
		return &llm.Response{Content: text}, nil
	}
}

func TestChannelTurnSendsEachPartOnceInOrderAndRecordsThem(t *testing.T) {
	// The first send is rate-limited: retried after the platform's delay,
	// and no part goes twice.
	w := newChannelTurnEnv(answer("part one\n\npart two"), func(n int) error {
		if n == 1 {
			return temporal.NewApplicationErrorWithOptions("429", workflows.ErrTypeChannelRateLimited,
				temporal.ApplicationErrorOptions{NextRetryDelay: 3 * time.Second})
		}
		return nil
	})
	w.env.ExecuteWorkflow(workflows.ChannelTurnWorkflowName, workflows.ChannelTurnInput{Message: channelMsg})
	if err := w.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(w.sends) != 2 || w.sends[0].Text != "part one" || w.sends[1].Text != "part two" {
		t.Fatalf("sends: %+v", w.sends)
	}
	// The reply quotes the message with its first part only.
	if w.sends[0].ReplyTo != "9" || w.sends[1].ReplyTo != "" || w.sends[0].ChatID != "1001" {
		t.Fatalf("reply routing: %+v", w.sends)
	}
	if len(w.records) != 1 || w.records[0].Status != models.ChannelMessageAnswered || fmt.Sprint(w.records[0].ReplyIDs) != "[101 102]" {
		t.Fatalf("record: %+v", w.records)
	}
}

func TestChannelTurnAnswersANoticeWhenTheRunFails(t *testing.T) {
	w := newChannelTurnEnv(func(workflows.LLMTurnInput) (*llm.Response, error) {
		return nil, temporal.NewNonRetryableApplicationError("budget exceeded", workflows.ErrTypeLLMRejected, nil)
	}, func(int) error { return nil })
	w.env.ExecuteWorkflow(workflows.ChannelTurnWorkflowName, workflows.ChannelTurnInput{Message: channelMsg})
	var app *temporal.ApplicationError
	if err := w.env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeChannelTurnFailed {
		t.Fatalf("workflow error: %v", err)
	}
	if len(w.fins) != 1 || !w.fins[0].Failed || len(w.sends) != 1 || w.sends[0].Text != "Sorry, I could not answer that." {
		t.Fatalf("finish %+v, sends %+v", w.fins, w.sends)
	}
	if len(w.records) != 1 || w.records[0].Status != models.ChannelMessageFailed {
		t.Fatalf("record: %+v", w.records)
	}
}

func TestChannelTurnGivesUpOnAPartThePlatformRefuses(t *testing.T) {
	w := newChannelTurnEnv(answer("x"), func(n int) error {
		if n == 2 {
			return temporal.NewNonRetryableApplicationError("chat not found", workflows.ErrTypeChannelRefused, nil)
		}
		return nil
	})
	w.env.ExecuteWorkflow(workflows.ChannelTurnWorkflowName, workflows.ChannelTurnInput{Message: channelMsg})
	if err := w.env.GetWorkflowError(); err == nil {
		t.Fatal("a refused reply ended as answered")
	}
	if len(w.sends) != 1 || len(w.records) != 1 || w.records[0].Status != models.ChannelMessageFailed || len(w.records[0].ReplyIDs) != 1 {
		t.Fatalf("sends %+v, records %+v", w.sends, w.records)
	}
}

// conversationEnv runs ChannelConversation with ChannelTurn mocked.
type conversationEnv struct {
	env   *testsuite.TestWorkflowEnvironment
	mu    sync.Mutex
	turns []string
}

func newConversationEnv() *conversationEnv {
	return newConversationEnvWith(nil)
}

func newConversationEnvWith(fail func(id string) error) *conversationEnv {
	var suite testsuite.WorkflowTestSuite
	c := &conversationEnv{env: suite.NewTestWorkflowEnvironment()}
	c.env.RegisterWorkflowWithOptions(workflows.ChannelConversation, workflow.RegisterOptions{Name: workflows.ChannelConversationWorkflowName})
	c.env.RegisterWorkflowWithOptions(workflows.ChannelTurn, workflow.RegisterOptions{Name: workflows.ChannelTurnWorkflowName})
	c.env.OnWorkflow(workflows.ChannelTurnWorkflowName, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.ChannelTurnInput) error {
		// A long turn: later messages arrive while it runs.
		if err := workflow.Sleep(ctx, 10*time.Second); err != nil {
			return err
		}
		if fail != nil {
			if err := fail(in.Message.MessageID); err != nil {
				return err
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.turns = append(c.turns, in.Message.MessageID)
		return nil
	})
	return c
}

func (c *conversationEnv) signalAt(d time.Duration, ids ...string) {
	c.env.RegisterDelayedCallback(func() {
		for _, id := range ids {
			c.env.SignalWorkflow(workflows.ChannelMessageSignal, workflows.ChannelMessage{ChannelID: "telegram", MessageID: id, ChatID: "1", Text: "m" + id})
		}
	}, d)
}

func TestChannelConversationHandlesMessagesInOrderOnceAndEndsWhenIdle(t *testing.T) {
	c := newConversationEnv()
	c.signalAt(0, "1")
	// Arrive while message 1's turn runs; 1 again is a redelivery.
	c.signalAt(2*time.Second, "2", "1", "3")
	c.signalAt(25*time.Second, "3", "4")
	c.env.ExecuteWorkflow(workflows.ChannelConversationWorkflowName, workflows.ChannelConversationInput{ChannelID: "telegram", ChatID: "1"})
	if err := c.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.turns) != "[1 2 3 4]" {
		t.Fatalf("turns %v, want [1 2 3 4]", c.turns)
	}
}

func TestChannelConversationContinuesAsNewCarryingWhatIsQueued(t *testing.T) {
	c := newConversationEnv()
	ids := make([]string, workflows.ChannelConversationMaxMessages+2)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	c.signalAt(0, ids...)
	c.env.ExecuteWorkflow(workflows.ChannelConversationWorkflowName, workflows.ChannelConversationInput{ChannelID: "telegram", ChatID: "1"})
	var can *workflow.ContinueAsNewError
	if err := c.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	if len(c.turns) != workflows.ChannelConversationMaxMessages {
		t.Fatalf("%d turns before continuing", len(c.turns))
	}
	var next workflows.ChannelConversationInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(next.Pending) != 2 || next.Pending[0].MessageID != ids[len(ids)-2] || len(next.Recent) == 0 {
		t.Fatalf("carried: %d pending %+v, %d recent", len(next.Pending), next.Pending, len(next.Recent))
	}
}

func TestChannelConversationGoesOnAfterAFailedTurn(t *testing.T) {
	// A failed turn recorded itself and answered a notice; the next
	// message of the conversation is still handled.
	c := newConversationEnvWith(func(id string) error {
		if id == "old" {
			return temporal.NewNonRetryableApplicationError("the run failed", workflows.ErrTypeChannelTurnFailed, nil)
		}
		return nil
	})
	c.signalAt(0, "old", "new")
	c.env.ExecuteWorkflow(workflows.ChannelConversationWorkflowName, workflows.ChannelConversationInput{ChannelID: "telegram", ChatID: "1"})
	if err := c.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.turns) != "[new]" {
		t.Fatalf("turns %v", c.turns)
	}
}

func TestDeliveryToAMessagingChannelSendsItsPartsAndRecordsTheOutcome(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	acts := &activities.ChannelActivities{}
	env.RegisterWorkflowWithOptions(workflows.Delivery, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	env.RegisterActivity(acts)
	env.RegisterActivity(&activities.DeliveryActivities{})
	env.OnActivity(acts.ChannelDeliveryParts, mock.Anything, mock.Anything).Return([]string{"report part 1", "report part 2"}, nil)
	var sent []workflows.ChannelSendInput
	env.OnActivity(acts.ChannelSend, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.ChannelSendInput) (*workflows.ChannelSent, error) {
		sent = append(sent, in)
		return &workflows.ChannelSent{PlatformID: fmt.Sprint(len(sent))}, nil
	})
	var done []workflows.ChannelDeliveryDone
	env.OnActivity(acts.ChannelDeliveryDone, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.ChannelDeliveryDone) error {
		done = append(done, in)
		return nil
	})
	env.ExecuteWorkflow(workflows.DeliveryWorkflowName, workflows.DeliveryInput{DeliveryID: "dlv_1", Channel: "telegram", To: "-100", Messaging: true,
		Body: `{"text":"report"}`})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0].ChatID != "-100" || sent[0].ChannelID != "telegram" || sent[1].Text != "report part 2" {
		t.Fatalf("sent: %+v", sent)
	}
	if len(done) != 1 || !done[0].Delivered || fmt.Sprint(done[0].PlatformIDs) != "[1 2]" {
		t.Fatalf("done: %+v", done)
	}
}
