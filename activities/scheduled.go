package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Agents is the agent registry (*agentdef.Registry).
type Agents interface {
	Get(id string) (*agentdef.Definition, bool)
}

// ScheduledActivities are the activities of the ScheduledAgent workflow.
type ScheduledActivities struct {
	Chat     *chat.Service
	Agents   Agents
	Store    ScheduledStore
	Channels *delivery.Channels
	// Retry is runtime.delivery, copied into the messages it creates.
	Retry workflows.DeliveryRetry

	// What a firing run turn by turn needs (see firing.go).
	Config  *config.Loaded
	Router  *llm.Router
	Toolbox *agent.Toolbox
	Log     *runlog.Log
	// ArtifactsDir holds each firing's work directory; Workspace is the
	// ledger attribution.
	ArtifactsDir, Workspace string
	// HeartbeatInterval overrides DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
}

// ScheduledSubject is the ledger subject of a scheduled agent's calls.
func ScheduledSubject(agentID string) string { return "schedule:" + agentID }

// ScheduledAgentRun runs the agent of one firing through the chat service
// (so every LLM call passes the router and its cost admission) with source
// "scheduled", in a fresh session per firing, and records the firing. It
// does not run the agent — and records the firing as skipped with the
// reason — when the agent is gone or disabled, its output channel cannot
// take the reply, or cost admission refuses the call. The workflow runs it
// once (no retries): a repeat could pay for the same firing twice.
func (a *ScheduledActivities) ScheduledAgentRun(ctx context.Context, in workflows.ScheduledAgentInput) (*workflows.ScheduledRunResult, error) {
	wid := activity.GetInfo(ctx).WorkflowExecution.ID
	rec := &models.ScheduleRun{WorkflowID: wid, AgentID: in.AgentID, Trigger: in.Trigger, Status: models.ScheduleRunRunning,
		StartedAt: time.Now().UTC()}
	if err := a.Store.SaveScheduleRun(ctx, rec); err != nil {
		return nil, err
	}
	res := a.run(ctx, in, rec)
	now := time.Now().UTC()
	rec.Status, rec.Error, rec.Code, rec.SessionID, rec.RunID, rec.FinishedAt = res.Status, res.Error, res.Code, res.SessionID, res.RunID, &now
	if res.Delivery != nil {
		rec.DeliveryID = res.Delivery.DeliveryID
	}
	if err := a.Store.SaveScheduleRun(context.WithoutCancel(ctx), rec); err != nil {
		return nil, err
	}
	return res, nil
}

func (a *ScheduledActivities) run(ctx context.Context, in workflows.ScheduledAgentInput, rec *models.ScheduleRun) *workflows.ScheduledRunResult {
	skip := func(format string, args ...any) *workflows.ScheduledRunResult {
		return &workflows.ScheduledRunResult{Status: models.ScheduleRunSkipped, Error: fmt.Sprintf(format, args...)}
	}
	def, ok := a.Agents.Get(in.AgentID)
	switch {
	case !ok:
		return skip("agent %s no longer exists", in.AgentID)
	case !def.IsEnabled():
		return skip("agent %s is disabled", in.AgentID)
	case def.Schedule == nil:
		return skip("agent %s has no schedule any more", in.AgentID)
	}
	out := def.Schedule.Output
	dest := ""
	if out.Channel != "" {
		var err error
		if dest, err = a.Channels.Check(ctx, out.Channel, out.To); err != nil {
			return skip("output channel %s cannot take the reply: %v", out.Channel, err)
		}
	}
	sum := sha256.Sum256([]byte(rec.WorkflowID))
	sessionID := fmt.Sprintf("scheduled-%s-%s", def.ID, hex.EncodeToString(sum[:8]))
	ctx = auth.WithPrincipal(ctx, &auth.Principal{Subject: ScheduledSubject(def.ID), Role: auth.RoleMember, Method: "schedule"})
	reply, err := a.Chat.Chat(ctx, chat.Request{AgentID: def.ID, Text: prompt(def, rec.StartedAt), UserID: "schedule", Username: "schedule",
		SessionID: sessionID, CreateSession: true, Source: llm.SourceScheduled,
		Metadata: map[string]any{"trigger": in.Trigger, "workflow_id": rec.WorkflowID}}, nil)
	if r, ok := costs.AsRejection(err); ok {
		res := skip("cost admission refused the run: %s", r.Message)
		res.Code = r.Code
		return res
	}
	if err != nil {
		if errors.Is(err, chat.ErrAgentDisabled) || errors.Is(err, chat.ErrAgentNotFound) {
			return skip("%v", err)
		}
		return &workflows.ScheduledRunResult{Status: models.ScheduleRunFailed, Error: err.Error(), SessionID: sessionID}
	}
	res := &workflows.ScheduledRunResult{Status: models.ScheduleRunSucceeded, SessionID: reply.SessionID, RunID: reply.RunID}
	if out.Channel == "" {
		return res
	}
	id := delivery.NewID()
	msg, err := delivery.ChannelInput(delivery.ChannelMessage{DeliveryID: id, Channel: out.Channel, Text: reply.Reply, To: out.To,
		AgentID: def.ID, Source: delivery.SourceSchedule, SessionID: reply.SessionID, RunID: reply.RunID, CreatedAt: time.Now().UTC()}, a.Retry)
	if err != nil {
		return &workflows.ScheduledRunResult{Status: models.ScheduleRunFailed, Error: "encode the reply: " + err.Error()}
	}
	res.Delivery = &msg
	res.Destination = delivery.DisplayURL(dest)
	// The workflow input rides along as the record's outbox entry: should
	// this activity die before the firing's record names the delivery, the
	// delivery sweep starts it instead of leaving it pending for ever.
	input, err := json.Marshal(res.Delivery)
	if err != nil {
		return &workflows.ScheduledRunResult{Status: models.ScheduleRunFailed, Error: "encode the delivery: " + err.Error()}
	}
	d := delivery.Record(msg, dest)
	d.StartInput = string(input)
	if err := a.Store.CreateDelivery(context.WithoutCancel(ctx), d); err != nil {
		return &workflows.ScheduledRunResult{Status: models.ScheduleRunFailed, Error: err.Error()}
	}
	return res
}

// prompt is the message a firing sends: schedule.prompt, or a line naming
// the firing time.
func prompt(def *agentdef.Definition, at time.Time) string {
	if def.Schedule.Prompt != "" {
		return def.Schedule.Prompt
	}
	return fmt.Sprintf("Scheduled run of %s at %s.", def.DisplayName(), at.UTC().Format(time.RFC3339))
}

// ScheduledAgentRecord sets a firing's final status (the Delivery workflow
// could not be started, or the run activity itself failed).
func (a *ScheduledActivities) ScheduledAgentRecord(ctx context.Context, in workflows.ScheduledRecordInput) error {
	return a.Store.FinishScheduleRun(ctx, models.ScheduleRun{WorkflowID: in.WorkflowID, AgentID: in.AgentID, Trigger: in.Trigger,
		Status: in.Status, Error: in.Error})
}
