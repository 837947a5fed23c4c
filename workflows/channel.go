package workflows

import (
	"errors"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/models"
)

// ChannelConversation handles the messages of one conversation in order,
// one at a time: a message that arrives while the agent answers the one
// before waits its turn, so replies never come "one behind" or out of
// order. It ends after ChannelConversationIdle without a message and
// continues as new every ChannelConversationMaxMessages messages (or when
// Temporal suggests it), carrying what is queued.
func ChannelConversation(ctx workflow.Context, in ChannelConversationInput) error {
	signals := workflow.GetSignalChannel(ctx, ChannelMessageSignal)
	queue := in.Pending
	recent := newRecentIDs(in.Recent, 256)
	for _, m := range queue {
		recent.add(m.MessageID)
	}
	take := func(m ChannelMessage) {
		if recent.add(m.MessageID) {
			queue = append(queue, m)
		}
	}
	drain := func() {
		for {
			var m ChannelMessage
			if !signals.ReceiveAsync(&m) {
				return
			}
			take(m)
		}
	}
	handled := 0
	for {
		drain()
		if len(queue) == 0 {
			timerCtx, cancelTimer := workflow.WithCancel(ctx)
			idle := false
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
				var m ChannelMessage
				c.Receive(ctx, &m)
				take(m)
			})
			sel.AddFuture(workflow.NewTimer(timerCtx, ChannelConversationIdle), func(workflow.Future) { idle = true })
			sel.Select(ctx)
			cancelTimer()
			if idle {
				// Signals that came with the timer are handled, not lost:
				// the workflow ends only with nothing queued (and Temporal
				// refuses to complete it while a new signal is unhandled).
				drain()
				if len(queue) == 0 {
					return nil
				}
			}
			continue
		}
		m := queue[0]
		queue = queue[1:]
		if err := runChannelTurn(ctx, m); err != nil {
			return err
		}
		handled++
		if handled >= ChannelConversationMaxMessages || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			drain()
			next := ChannelConversationInput{ChannelID: in.ChannelID, ChatID: in.ChatID, ThreadID: in.ThreadID, Pending: queue, Recent: recent.list()}
			return workflow.NewContinueAsNewError(ctx, ChannelConversationWorkflowName, next)
		}
	}
}

// runChannelTurn runs a message's ChannelTurn child and waits for it. The
// child's id is the message's platform identity under REJECT_DUPLICATE:
// a message already handled (by this conversation or an earlier one) is
// refused by Temporal and skipped. A failed turn has recorded itself; the
// conversation goes on with the next message. Only the conversation's own
// cancellation is returned.
func runChannelTurn(ctx workflow.Context, m ChannelMessage) error {
	childCtx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               ChannelTurnWorkflowID(m.ChannelID, m.MessageID),
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: ChannelTurnTimeout + ChannelSendWindow + 10*time.Minute,
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		StaticSummary:            "message " + m.MessageID + " of " + m.ChannelID,
	})
	err := workflow.ExecuteChildWorkflow(childCtx, ChannelTurnWorkflowName, ChannelTurnInput{Message: m}).Get(ctx, nil)
	var dup *temporal.ChildWorkflowExecutionAlreadyStartedError
	switch {
	case err == nil:
	case errors.As(err, &dup):
		workflow.GetLogger(ctx).Info("message already handled; skipped", "channel", m.ChannelID, "message", m.MessageID)
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		workflow.GetLogger(ctx).Warn("message not answered", "channel", m.ChannelID, "message", m.MessageID, "err", err)
	}
	return nil
}

// ChannelTurn answers one message: prepare (agent, session history,
// snapshot), the agent run on the agent-run core (each LLM turn and tool
// call its own activity), finish (the exchange joins the session once; the
// reply is split to the platform's limit), then each part is sent by its
// own ChannelSend activity (paced, a 429's retry_after honoured), and what
// became of the message is recorded. A crash anywhere resumes at the step
// it was in: a part sent is never sent again by a later step. A failed run
// answers a short notice instead of silence.
func ChannelTurn(ctx workflow.Context, in ChannelTurnInput) error {
	stepCtx := workflow.WithLocalActivityOptions(ctx, channelStepOptions)
	prep := in.Prepared
	if prep == nil {
		prep = new(ChannelPrepared)
		if err := workflow.ExecuteLocalActivity(stepCtx, ActivityChannelTurnPrepare, in).Get(ctx, prep); err != nil {
			return finishChannelTurn(ctx, ChannelFinishInput{In: in, Failed: true, Error: stepError(err).Error()})
		}
	}
	if in.Deadline.IsZero() {
		in.Deadline = workflow.Now(ctx).Add(channelTurnTimeout(in))
	}
	run := &agentRun{ref: prep.Run, outline: prep.Agent, llmStep: ActivityChannelLLMTurn, toolStep: ActivityChannelTool,
		llmOpts: llmActivityOptions, toolOpts: toolOptions(prep.ToolTimeout), localLLMTurns: prep.LocalLLMTurns}
	res := run.runUntil(ctx, in.Continuation, in.Deadline)
	if res.next != nil && ctx.Err() == nil {
		next := in
		next.Prepared, next.Continuation = prep, res.next
		return workflow.NewContinueAsNewError(ctx, ChannelTurnWorkflowName, next)
	}
	fin := ChannelFinishInput{In: in, Run: prep.Run}
	if res.out != nil {
		fin.Turns = res.out.Turns
	}
	switch {
	case res.timedOut:
		fin.Failed, fin.Error = true, "the run exceeded its time limit of "+channelTurnTimeout(in).String()
	case res.err != nil:
		fin.Failed, fin.Error = true, res.err.Error()
	}
	return finishChannelTurn(ctx, fin)
}

func channelTurnTimeout(in ChannelTurnInput) time.Duration {
	if in.Timeout > 0 {
		return in.Timeout
	}
	return ChannelTurnTimeout
}

// finishChannelTurn stores the outcome, sends the reply's parts and
// records the message's end. It runs on a disconnected context so that a
// cancelled conversation still records what happened.
func finishChannelTurn(ctx workflow.Context, fin ChannelFinishInput) error {
	m := fin.In.Message
	finishCtx, _ := workflow.NewDisconnectedContext(ctx)
	stepCtx := workflow.WithLocalActivityOptions(finishCtx, channelStepOptions)
	var done ChannelFinished
	if err := workflow.ExecuteLocalActivity(stepCtx, ActivityChannelTurnFinish, fin).Get(finishCtx, &done); err != nil {
		fin.Failed, fin.Error = true, stepError(err).Error()
	}
	rec := ChannelRecordInput{Message: m, Status: models.ChannelMessageAnswered, RunID: fin.Run.WorkflowID, Error: fin.Error}
	if fin.Failed {
		rec.Status = models.ChannelMessageFailed
	}
	for i, part := range done.Parts {
		sent, err := sendChannelPart(finishCtx, ChannelSendInput{ChannelID: m.ChannelID, ChatID: m.ChatID, ThreadID: m.ThreadID,
			ReplyTo: replyTo(m, i), Group: m.Group, Text: part, Key: m.MessageID + "/" + strconv.Itoa(i)})
		if err != nil {
			rec.Status, rec.Error = models.ChannelMessageFailed, "reply not delivered: "+stepError(err).Error()
			break
		}
		rec.ReplyIDs = append(rec.ReplyIDs, sent.PlatformID)
	}
	if err := workflow.ExecuteLocalActivity(stepCtx, ActivityChannelRecord, rec).Get(finishCtx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not record the message's outcome", "message", m.MessageID, "err", err)
	}
	if rec.Status == models.ChannelMessageFailed {
		return temporal.NewNonRetryableApplicationError(rec.Error, ErrTypeChannelTurnFailed, nil)
	}
	return nil
}

// replyTo quotes the message with the reply's first part only.
func replyTo(m ChannelMessage, part int) string {
	if part == 0 {
		return m.ReplyTo
	}
	return ""
}

// channelStepOptions run the short database steps of a message (prepare,
// finish, record) as local activities: each is idempotent, and a
// message's path through Temporal is then the child's start, its LLM
// turns and its sends, which is most of what a reply waits for.
var channelStepOptions = workflow.LocalActivityOptions{
	ScheduleToCloseTimeout: 10 * time.Minute,
	StartToCloseTimeout:    30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		NonRetryableErrorTypes: []string{ErrTypeRunLog, ErrTypeRunGone, ErrTypeLLMRejected}},
}

// channelSendOptions retry a part until ChannelSendWindow has passed:
// rate limits come back with the platform's retry_after as the next
// delay (ChannelSend sets it); refusals end at once.
var channelSendOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    2 * time.Minute,
	ScheduleToCloseTimeout: ChannelSendWindow,
	HeartbeatTimeout:       30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: []string{ErrTypeChannelRefused},
	},
}

// sendChannelPart sends one part with ChannelSend: first once as a local
// activity (a reply then costs no activity task round trip through the
// server, most of what a person waits for after the model), and when that
// fails, as a regular activity retried within the send window, after the
// platform's retry_after when it asked for one. A refusal is not retried.
// The duplicate window is the same either way: between the platform
// taking the part and Temporal recording that it did
// (docs/channels.md, "Delivery guarantees").
func sendChannelPart(ctx workflow.Context, in ChannelSendInput) (ChannelSent, error) {
	var sent ChannelSent
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: channelSendOptions.StartToCloseTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	err := workflow.ExecuteLocalActivity(lctx, ActivityChannelSend, in).Get(ctx, &sent)
	if err == nil {
		return sent, nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if app.Type() == ErrTypeChannelRefused || app.NonRetryable() {
			return sent, err
		}
		if d := app.NextRetryDelay(); d > 0 {
			if err := workflow.Sleep(ctx, min(d, ChannelRetryAfterCap)); err != nil {
				return sent, err
			}
		}
	}
	opts := channelSendOptions
	opts.Summary = "send " + in.Key
	err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), ActivityChannelSend, in).Get(ctx, &sent)
	return sent, err
}

// recentIDs is a bounded set of message ids, oldest dropped first.
type recentIDs struct {
	max   int
	order []string
	set   map[string]bool
}

func newRecentIDs(ids []string, max int) *recentIDs {
	r := &recentIDs{max: max, set: map[string]bool{}}
	for _, id := range ids {
		r.add(id)
	}
	return r
}

// add records id; false when it was already there.
func (r *recentIDs) add(id string) bool {
	if r.set[id] {
		return false
	}
	r.set[id] = true
	r.order = append(r.order, id)
	if len(r.order) > r.max {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	return true
}

func (r *recentIDs) list() []string { return append([]string(nil), r.order...) }
