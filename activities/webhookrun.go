package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/memory"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/internal/runprep"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// WebhookRunActivities are the activities of the WebhookRun workflow
// (asynchronous inbound webhooks).
type WebhookRunActivities struct {
	Config   *config.Loaded
	Chat     *chat.Service
	Agents   Agents
	Store    WebhookRunStore
	Router   *llm.Router
	Toolbox  *agent.Toolbox
	Log      *runlog.Log
	Channels *delivery.Channels
	// Retry is runtime.delivery, copied into the reply's message.
	Retry workflows.DeliveryRetry
	// HeartbeatInterval overrides DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
}

// WebhookDeliveryID is the delivery id of an asynchronous run's reply,
// the same on every attempt.
func WebhookDeliveryID(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return "dlv_w" + hex.EncodeToString(sum[:8])
}

// WebhookRunPrepare marks the run running and resolves the agent with the
// session's conversation so far into the run's snapshot.
func (a *WebhookRunActivities) WebhookRunPrepare(ctx context.Context, in workflows.WebhookRunInput) (*workflows.WebhookPrepared, error) {
	rec := &models.WebhookRun{ID: in.RunID, AgentID: in.AgentID, Subject: in.Subject, UserID: in.UserID, SessionID: in.SessionID,
		ThreadID: in.ThreadID, Status: models.WebhookRunRunning}
	if err := a.Store.CreateWebhookRun(ctx, rec); err != nil {
		return nil, err
	}
	if err := a.Store.UpdateWebhookRun(ctx, in.RunID, map[string]any{"status": models.WebhookRunRunning}); err != nil {
		return nil, err
	}
	def, ok := a.Agents.Get(in.AgentID)
	if !ok || !def.IsEnabled() {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent %s is gone or disabled", in.AgentID), workflows.ErrTypeRunGone, nil)
	}
	who := &auth.Principal{Subject: in.Subject, Role: auth.RoleMember, Method: "webhook"}
	prep, err := a.preparer().Prepare(ctx, runprep.Request{Agent: def, Who: who, UserText: in.Text,
		MemoryUser: memory.UserOf(in.UserID), MemorySource: in.SessionID,
		History: func(ctx context.Context) ([]llm.Message, error) { return a.Chat.History(ctx, in.SessionID) }})
	var unresolved *runprep.ResolveError
	if errors.As(err, &unresolved) {
		return nil, temporal.NewNonRetryableApplicationError(unresolved.Err.Error(), workflows.ErrTypeLLMRejected, nil)
	}
	if err != nil {
		return nil, err
	}
	snap, sha := prep.Snapshot, prep.SHA
	return &workflows.WebhookPrepared{
		Run: workflows.RunRef{WorkflowID: workflows.WebhookRunWorkflowID(in.RunID), Attempt: 1, AgentID: def.ID, Trigger: "webhook",
			Subject: in.Subject, DataClassification: def.LLM.DataClassification, Snapshot: sha},
		Agent:         snap.Agent.Outline(),
		ToolTimeout:   a.Config.Runtime.ToolTimeout,
		LocalLLMTurns: true,
	}, nil
}

// preparer resolves and snapshots the agents of webhook runs.
func (a *WebhookRunActivities) preparer() runprep.Preparer {
	return runprep.Preparer{Config: a.Config, Router: a.Router, Toolbox: a.Toolbox, Log: a.Log}
}

// WebhookLLMTurn is one LLM turn of the run (source webhook).
func (a *WebhookRunActivities) WebhookLLMTurn(ctx context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	runID := in.Run.WorkflowID[len("webhook-"):]
	return LLMTurn(ctx, a.Log, a.Router, in, llm.CallMeta{
		CallID:    CallID(in.Run, in.Turn),
		Subject:   in.Run.Subject,
		Workspace: a.Config.Workspace.Root,
		AgentID:   in.Run.AgentID,
		SessionID: a.sessionOf(ctx, runID),
		RunID:     runID,
		RootRunID: in.Run.RootRunID,
		Source:    llm.SourceWebhook,
		Trigger:   in.Run.Trigger,
	})
}

// sessionOf reads the run's session id (ledger attribution); "" when the
// record cannot be read, which only loses the attribution.
func (a *WebhookRunActivities) sessionOf(ctx context.Context, runID string) string {
	if r, err := a.Store.GetWebhookRun(ctx, runID); err == nil {
		return r.SessionID
	}
	return ""
}

// WebhookTool runs one tool call in the session's work directory, as a
// synchronous webhook's tools do.
func (a *WebhookRunActivities) WebhookTool(ctx context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	runID := in.Run.WorkflowID[len("webhook-"):]
	dir := filepath.Join(a.Config.Workspace.SessionsDir(), a.sessionOf(ctx, runID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agent.ToolResult{}, fmt.Errorf("create work directory of webhook run %s: %w", runID, err)
	}
	return ToolStep(ctx, a.Log, a.Toolbox, dir, in, func(agent.ProducedFile) (bool, error) { return false, nil }, func() {})
}

// WebhookRunFinish stores the outcome: on success the exchange joins the
// session (once) and the reply is kept on the run record; when the agent
// names webhook.reply_output, the reply's delivery is created under an id
// derived from the run. Repeating it changes nothing.
func (a *WebhookRunActivities) WebhookRunFinish(ctx context.Context, fin workflows.WebhookFinishInput) (*workflows.WebhookRunResult, error) {
	in := fin.In
	out := &workflows.WebhookRunResult{Status: fin.Status, Error: fin.Error}
	now := time.Now().UTC()
	set := map[string]any{"status": fin.Status, "error": fin.Error, "turns": fin.Turns, "finished_at": now}
	if fin.Status == models.WebhookRunSucceeded {
		reply, err := a.Log.Last(ctx, fin.Run.Key())
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
		}
		responseID := "resp-" + in.RunID
		if err := a.saveExchange(ctx, fin, responseID, reply.Content); err != nil {
			return nil, err
		}
		set["reply"], set["response_id"] = reply.Content, responseID
		if def, ok := a.Agents.Get(in.AgentID); ok && def.Webhook != nil && def.Webhook.ReplyOutput != nil && def.Webhook.ReplyOutput.Channel != "" {
			msg, err := a.replyDelivery(ctx, def, in, reply.Content)
			if err != nil {
				set["error"] = err.Error()
			} else {
				out.Delivery = msg
				set["delivery_id"] = msg.DeliveryID
			}
		}
	}
	if err := a.Store.UpdateWebhookRun(ctx, in.RunID, set); err != nil {
		return nil, err
	}
	return out, nil
}

func (a *WebhookRunActivities) saveExchange(ctx context.Context, fin workflows.WebhookFinishInput, responseID, reply string) error {
	in := fin.In
	if _, err := a.Store.AgentRunByID(ctx, in.RunID); err == nil {
		return nil
	}
	var snap workflows.RunSnapshot
	if err := a.Log.Snapshot(ctx, fin.Run.Snapshot, &snap); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	now := time.Now().UTC()
	sess := &models.ChatSession{ID: in.SessionID, AgentID: in.AgentID, Subject: in.Subject, UserID: in.UserID, Username: in.Username,
		Source: llm.SourceWebhook}
	run := &models.AgentRun{RunID: in.RunID, ResponseID: responseID, AgentID: in.AgentID, SessionID: in.SessionID, Subject: in.Subject,
		Source: llm.SourceWebhook, Provider: snap.Agent.Provider, Model: snap.Agent.Model, Status: "succeeded", Turns: fin.Turns,
		InputTokens: fin.Usage.InputTokens, OutputTokens: fin.Usage.OutputTokens, Metadata: in.Metadata, StartedAt: now, FinishedAt: &now}
	msgs := []models.ChatMessage{
		{RunID: in.RunID, Role: llm.RoleUser, Content: in.Text},
		{RunID: in.RunID, Role: llm.RoleAssistant, Content: reply},
	}
	return a.Store.SaveExchange(ctx, sess, run, msgs)
}

func (a *WebhookRunActivities) replyDelivery(ctx context.Context, def *agentdef.Definition, in workflows.WebhookRunInput, reply string) (*workflows.DeliveryInput, error) {
	out := def.Webhook.ReplyOutput
	dest, err := a.Channels.Check(ctx, out.Channel, out.To)
	if err != nil {
		return nil, fmt.Errorf("reply channel %s cannot take the reply: %v", out.Channel, err)
	}
	id := WebhookDeliveryID(in.RunID)
	msg, err := delivery.ChannelInput(delivery.ChannelMessage{DeliveryID: id, Channel: out.Channel, Text: reply, To: out.To,
		AgentID: def.ID, Source: delivery.SourceWebhook, SessionID: in.SessionID, RunID: in.RunID, CreatedAt: time.Now().UTC()}, a.Retry)
	if err != nil {
		return nil, err
	}
	return &msg, a.Store.CreateDelivery(ctx, delivery.Record(msg, dest))
}
