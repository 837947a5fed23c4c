package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/internal/runprep"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// ChannelSender sends on messaging channels (*channels.Service).
type ChannelSender interface {
	Send(ctx context.Context, channelID string, out channels.Outbound) (channels.Sent, error)
	Limits(ctx context.Context, channelID string) (channels.Limits, error)
}

// ChannelStore is what the channel activities store: the conversation
// (sessions, the action log) and the messages' record.
type ChannelStore interface {
	SaveExchange(ctx context.Context, sess *models.ChatSession, run *models.AgentRun, msgs []models.ChatMessage) error
	AgentRunByID(ctx context.Context, runID string) (*models.AgentRun, error)
	RecordChannelMessage(ctx context.Context, m *models.ChannelMessage) error
}

// ChannelActivities are the activities of the ChannelTurn workflow (a
// messaging channel's message) and of channel deliveries.
type ChannelActivities struct {
	Config   *config.Loaded
	Chat     *chat.Service
	Agents   Agents
	Store    ChannelStore
	Router   *llm.Router
	Toolbox  *agent.Toolbox
	Log      *runlog.Log
	Channels ChannelSender
	// Deliveries records the outcome of channel deliveries.
	Deliveries models.DeliveryStore
	// HeartbeatInterval overrides DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
}

// channelSubject is who a channel's runs are attributed to (the ledger's
// subject, the session's owner).
func channelSubject(channelID string) string { return "channel:" + channelID }

// ChannelTurnPrepare records the message and resolves the agent with the
// conversation so far into the run's snapshot.
func (a *ChannelActivities) ChannelTurnPrepare(ctx context.Context, in workflows.ChannelTurnInput) (*workflows.ChannelPrepared, error) {
	m := in.Message
	if err := a.Store.RecordChannelMessage(ctx, &models.ChannelMessage{ChannelID: m.ChannelID, MessageID: m.MessageID, ChatID: m.ChatID,
		ThreadID: m.ThreadID, UserID: m.UserID, Status: models.ChannelMessageReceived, ReceivedAt: received(m)}); err != nil {
		return nil, err
	}
	def, ok := a.Agents.Get(m.AgentID)
	if !ok || !def.IsEnabled() {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent %s is gone or disabled", m.AgentID), workflows.ErrTypeRunGone, nil)
	}
	sessionID := workflows.ChannelSessionID(m.ChannelID, m.ChatID, m.ThreadID)
	who := &auth.Principal{Subject: channelSubject(m.ChannelID), Role: auth.RoleMember, Method: "channel"}
	prep, err := a.preparer().Prepare(ctx, runprep.Request{Agent: def, Who: who, UserText: m.Text,
		MemoryUser: m.UserID, MemorySource: sessionID,
		History: func(ctx context.Context) ([]llm.Message, error) { return a.Chat.History(ctx, sessionID) }})
	var unresolved *runprep.ResolveError
	if errors.As(err, &unresolved) {
		return nil, temporal.NewNonRetryableApplicationError(unresolved.Err.Error(), workflows.ErrTypeLLMRejected, nil)
	}
	if err != nil {
		return nil, err
	}
	return &workflows.ChannelPrepared{
		Run: workflows.RunRef{WorkflowID: workflows.ChannelTurnWorkflowID(m.ChannelID, m.MessageID), Attempt: 1, AgentID: def.ID,
			Trigger: "channel", Subject: channelSubject(m.ChannelID), DataClassification: def.LLM.DataClassification,
			Snapshot: prep.SHA, SessionID: sessionID},
		Agent:         prep.Snapshot.Agent.Outline(),
		SessionID:     sessionID,
		ToolTimeout:   a.Config.Runtime.ToolTimeout,
		LocalLLMTurns: true,
	}, nil
}

func received(m workflows.ChannelMessage) time.Time {
	if !m.Received.IsZero() {
		return m.Received.UTC()
	}
	return time.Now().UTC()
}

func (a *ChannelActivities) preparer() runprep.Preparer {
	return runprep.Preparer{Config: a.Config, Router: a.Router, Toolbox: a.Toolbox, Log: a.Log}
}

// ChannelLLMTurn is one LLM turn of a message's run: ledger source and
// trigger channel (cost rule 1).
func (a *ChannelActivities) ChannelLLMTurn(ctx context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	return LLMTurn(ctx, a.Log, a.Router, in, llm.CallMeta{
		CallID:    CallID(in.Run, in.Turn),
		Subject:   in.Run.Subject,
		Workspace: a.Config.Workspace.Root,
		AgentID:   in.Run.AgentID,
		SessionID: in.Run.SessionID,
		RunID:     in.Run.WorkflowID,
		RootRunID: in.Run.RootRunID,
		Source:    llm.SourceChannel,
		Trigger:   in.Run.Trigger,
	})
}

// ChannelTool runs one tool call in the conversation's work directory.
func (a *ChannelActivities) ChannelTool(ctx context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	dir := filepath.Join(a.Config.Workspace.SessionsDir(), in.Run.SessionID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agent.ToolResult{}, fmt.Errorf("create work directory of %s: %w", in.Run.WorkflowID, err)
	}
	return ToolStep(ctx, a.Log, a.Toolbox, dir, in, func(agent.ProducedFile) (bool, error) { return false, nil }, func() {})
}

// ChannelTurnFinish stores a successful exchange in the conversation's
// session (once: repeating it changes nothing) and returns the reply cut to
// the platform's length limit. A failed run answers a short notice, so the
// person is not left waiting for nothing.
func (a *ChannelActivities) ChannelTurnFinish(ctx context.Context, fin workflows.ChannelFinishInput) (*workflows.ChannelFinished, error) {
	m := fin.In.Message
	limits, err := a.Channels.Limits(ctx, m.ChannelID)
	if err != nil {
		return nil, err
	}
	text := failureNotice(fin.Error)
	if !fin.Failed {
		reply, err := a.Log.Last(ctx, fin.Run.Key())
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
		}
		if err := a.saveExchange(ctx, fin, reply.Content); err != nil {
			return nil, err
		}
		text = reply.Content
	}
	return &workflows.ChannelFinished{Parts: channels.Split(text, limits.MaxText)}, nil
}

// failureNotice is what a person reads when the agent could not answer:
// the reason cut short, with anything secret-looking removed.
func failureNotice(reason string) string {
	reason = scrub.Secrets(strings.TrimSpace(reason))
	if r := []rune(reason); len(r) > 200 {
		reason = string(r[:200]) + "…"
	}
	if reason == "" {
		return "Sorry, I could not answer that."
	}
	return "Sorry, I could not answer that (" + reason + ")."
}

func (a *ChannelActivities) saveExchange(ctx context.Context, fin workflows.ChannelFinishInput, reply string) error {
	m := fin.In.Message
	runID := fin.Run.WorkflowID
	if _, err := a.Store.AgentRunByID(ctx, runID); err == nil {
		return nil
	}
	var snap workflows.RunSnapshot
	if err := a.Log.Snapshot(ctx, fin.Run.Snapshot, &snap); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	now := time.Now().UTC()
	sess := &models.ChatSession{ID: fin.Run.SessionID, AgentID: m.AgentID, Subject: fin.Run.Subject, UserID: m.UserID, Username: m.Username,
		Source: llm.SourceChannel}
	run := &models.AgentRun{RunID: runID, ResponseID: "resp-" + runID, AgentID: m.AgentID, SessionID: fin.Run.SessionID, Subject: fin.Run.Subject,
		Source: llm.SourceChannel, Provider: snap.Agent.Provider, Model: snap.Agent.Model, Status: "succeeded", Turns: fin.Turns,
		StartedAt: received(m), FinishedAt: &now}
	msgs := []models.ChatMessage{
		{RunID: runID, Role: llm.RoleUser, Content: m.Text},
		{RunID: runID, Role: llm.RoleAssistant, Content: reply},
	}
	return a.Store.SaveExchange(ctx, sess, run, msgs)
}

// ChannelSend sends one part. The platform's rate limit comes back as a
// retryable error whose next delay is the platform's retry_after (capped);
// a refusal ends the part's retries.
func (a *ChannelActivities) ChannelSend(ctx context.Context, in workflows.ChannelSendInput) (*workflows.ChannelSent, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	sent, err := a.Channels.Send(ctx, in.ChannelID, channels.Outbound{ChatID: in.ChatID, ThreadID: in.ThreadID, ReplyTo: in.ReplyTo, Text: in.Text, Group: in.Group})
	if err == nil {
		return &workflows.ChannelSent{PlatformID: sent.PlatformID}, nil
	}
	var limited *channels.RateLimited
	var refused *channels.Refused
	switch {
	case errors.As(err, &limited):
		return nil, temporal.NewApplicationErrorWithOptions(err.Error(), workflows.ErrTypeChannelRateLimited,
			temporal.ApplicationErrorOptions{NextRetryDelay: min(max(limited.RetryAfter, time.Second), workflows.ChannelRetryAfterCap)})
	case errors.As(err, &refused):
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeChannelRefused, nil)
	}
	return nil, err
}

// ChannelRecord records what became of an inbound message.
func (a *ChannelActivities) ChannelRecord(ctx context.Context, in workflows.ChannelRecordInput) error {
	m := in.Message
	row := &models.ChannelMessage{ChannelID: m.ChannelID, MessageID: m.MessageID, ChatID: m.ChatID, ThreadID: m.ThreadID, UserID: m.UserID,
		Status: in.Status, RunID: in.RunID, ReplyIDs: strings.Join(in.ReplyIDs, ","), Error: in.Error, ReceivedAt: received(m)}
	if in.Status == models.ChannelMessageAnswered {
		now := time.Now().UTC()
		row.AnsweredAt = &now
	}
	return a.Store.RecordChannelMessage(ctx, row)
}

// ChannelDeliveryParts cuts a messaging channel delivery's text (the
// message body's "text") to the platform's length limit.
func (a *ChannelActivities) ChannelDeliveryParts(ctx context.Context, msg workflows.DeliveryInput) ([]string, error) {
	var body struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(msg.Body), &body); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("the delivery's body is not a channel message: "+err.Error(), workflows.ErrTypeDeliveryRejected, nil)
	}
	limits, err := a.Channels.Limits(ctx, msg.Channel)
	if err != nil {
		return nil, err
	}
	return channels.Split(body.Text, limits.MaxText), nil
}

// ChannelDeliveryDone records a messaging channel delivery's outcome as
// its one, final attempt.
func (a *ChannelActivities) ChannelDeliveryDone(ctx context.Context, in workflows.ChannelDeliveryDone) error {
	msg := in.Delivery
	info := activity.GetInfo(ctx)
	ident := models.Delivery{ID: msg.DeliveryID, Channel: msg.Channel, Source: msg.Source, AgentID: msg.AgentID, Target: "chat:" + msg.To,
		WorkflowID: info.WorkflowExecution.ID}
	return a.Deliveries.RecordAttempt(ctx, models.AttemptRecord{Delivery: ident, Attempt: 1, Error: in.Error, Final: true, Delivered: in.Delivered})
}
