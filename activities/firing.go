package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/runprep"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// The steps of a firing run turn by turn on the agent-run core
// (ScheduledAgent since GetVersion "firing-per-turn"). Everything a retry
// could repeat is keyed by the firing's workflow id, which Temporal builds
// from the schedule's action time: the LLM call ids (one ledger row per
// turn), the session, the action-log row and the delivery id.

// firingKey is a short stable digest of a firing's workflow id.
func firingKey(workflowID string) string {
	sum := sha256.Sum256([]byte(workflowID))
	return hex.EncodeToString(sum[:8])
}

// FiringDeliveryID is the delivery id of a firing's reply: the same on
// every attempt of the finish step, so a crash never sends it twice.
func FiringDeliveryID(workflowID string) string { return "dlv_f" + firingKey(workflowID) }

// FiringRunID is the ledger and action-log run id of a firing.
func FiringRunID(workflowID string) string { return "firing-" + firingKey(workflowID) }

func firingSessionID(agentID, workflowID string) string {
	return fmt.Sprintf("scheduled-%s-%s", agentID, firingKey(workflowID))
}

// ScheduledAgentPrepare records the firing as running, checks that the
// agent and its output channel can take it (else the firing is skipped,
// with the reason), resolves the agent and stores it as the run's snapshot.
func (a *ScheduledActivities) ScheduledAgentPrepare(ctx context.Context, in workflows.ScheduledAgentInput) (*workflows.ScheduledPrepared, error) {
	wid := activity.GetInfo(ctx).WorkflowExecution.ID
	rec := &models.ScheduleRun{WorkflowID: wid, AgentID: in.AgentID, Trigger: in.Trigger, Status: models.ScheduleRunRunning,
		StartedAt: time.Now().UTC()}
	if err := a.Store.SaveScheduleRun(ctx, rec); err != nil {
		return nil, err
	}
	prep, err := a.prepare(ctx, in, wid, rec.StartedAt)
	if err != nil {
		return nil, err
	}
	if prep.Status == models.ScheduleRunSkipped {
		now := time.Now().UTC()
		rec.Status, rec.Error, rec.FinishedAt = prep.Status, prep.Error, &now
		if err := a.Store.SaveScheduleRun(ctx, rec); err != nil {
			return nil, err
		}
	}
	return prep, nil
}

func (a *ScheduledActivities) prepare(ctx context.Context, in workflows.ScheduledAgentInput, wid string, at time.Time) (*workflows.ScheduledPrepared, error) {
	skip := func(format string, args ...any) (*workflows.ScheduledPrepared, error) {
		return &workflows.ScheduledPrepared{Status: models.ScheduleRunSkipped, Error: fmt.Sprintf(format, args...)}, nil
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
	if out := def.Schedule.Output; out.Channel != "" {
		if _, err := a.Channels.Check(ctx, out.Channel, out.To); err != nil {
			return skip("output channel %s cannot take the reply: %v", out.Channel, err)
		}
	}
	who := &auth.Principal{Subject: ScheduledSubject(def.ID), Role: auth.RoleMember, Method: "schedule"}
	// Delegates: an agent with peers gets its ask_<peer> tools, and the
	// firing is the root of its delegation tree (docs/teams.md).
	prep, err := a.preparer().Prepare(ctx, runprep.Request{Agent: def, Who: who, UserText: prompt(def, at), Delegates: true})
	var unresolved *runprep.ResolveError
	if errors.As(err, &unresolved) {
		return skip("agent %s cannot run: %v", def.ID, unresolved.Err)
	}
	if err != nil {
		return nil, err
	}
	snap, sha := prep.Snapshot, prep.SHA
	var delegation *workflows.Delegation
	if len(def.Peers) > 0 {
		id := FiringRunID(wid)
		delegation = &workflows.Delegation{Peers: def.Peers, RunID: id, RootRunID: id, Lineage: []string{def.ID}}
	}
	return &workflows.ScheduledPrepared{
		Delegation: delegation,
		Status:     models.ScheduleRunRunning,
		Run: workflows.RunRef{WorkflowID: wid, Attempt: 1, AgentID: def.ID, Trigger: in.Trigger, Subject: who.Subject,
			DataClassification: def.LLM.DataClassification, Snapshot: sha, ScheduleID: in.ScheduleID},
		Agent:       snap.Agent.Outline(),
		SessionID:   firingSessionID(def.ID, wid),
		ToolTimeout: a.Config.Runtime.ToolTimeout,
		Approvals:   workflows.PolicyOf(def.Approvals),
		// Turns as local activities; the firing's workflow task timeout is
		// the schedule's (10 s), so a cancel or the deadline lands within
		// about 8 or 16 s of a turn that never answers.
		LocalLLMTurns: true,
	}, nil
}

// preparer resolves and snapshots the agents of firings.
func (a *ScheduledActivities) preparer() runprep.Preparer {
	p := runprep.Preparer{Config: a.Config, Router: a.Router, Toolbox: a.Toolbox, Log: a.Log}
	if a.Agents != nil {
		p.Agents = a.Agents.Get // the peers' descriptions of ask_<peer>
	}
	return p
}

// ScheduledLLMTurn is one LLM turn of a firing, through the router (cost
// admission and settlement) with source scheduled and a call id derived
// from the firing.
func (a *ScheduledActivities) ScheduledLLMTurn(ctx context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	wid := in.Run.WorkflowID
	return LLMTurn(ctx, a.Log, a.Router, in, llm.CallMeta{
		CallID:    CallID(in.Run, in.Turn),
		Subject:   in.Run.Subject,
		Workspace: a.Workspace,
		AgentID:   in.Run.AgentID,
		SessionID: firingSessionID(in.Run.AgentID, wid),
		RunID:     FiringRunID(wid),
		RootRunID: in.Run.RootRunID,
		Source:    llm.SourceScheduled,
		Trigger:   in.Run.Trigger,
	})
}

// ScheduledTool runs one tool call of a firing in the firing's own work
// directory under the artifact area.
func (a *ScheduledActivities) ScheduledTool(ctx context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	dir := filepath.Join(a.ArtifactsDir, "scheduled", in.Run.AgentID, firingKey(in.Run.WorkflowID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agent.ToolResult{}, fmt.Errorf("create work directory of firing %s: %w", in.Run.WorkflowID, err)
	}
	return ToolStep(ctx, a.Log, a.Toolbox, dir, in, func(agent.ProducedFile) (bool, error) { return false, nil }, func() {})
}

// ScheduledAgentFinish records how a firing's run ended: the session (the
// prompt and the full reply, read from the run log) and the action-log
// row once, the firing's record, and, when it succeeded and the schedule
// has an output channel, the delivery of the reply under an id derived
// from the firing. Repeating it changes nothing.
func (a *ScheduledActivities) ScheduledAgentFinish(ctx context.Context, in workflows.ScheduledFinishInput) (*workflows.ScheduledRunResult, error) {
	wid, agentID := in.Run.WorkflowID, in.Run.AgentID
	res := &workflows.ScheduledRunResult{Status: in.Status, Error: in.Error, Code: in.Code}
	rec := models.ScheduleRun{WorkflowID: wid, AgentID: agentID, Trigger: in.Trigger, Status: in.Status, Error: in.Error, Code: in.Code}
	if in.Status == models.ScheduleRunSucceeded {
		reply, err := a.Log.Last(ctx, in.Run.Key())
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
		}
		res.SessionID, res.RunID = in.SessionID, FiringRunID(wid)
		if err := a.saveFiringExchange(ctx, in, res.RunID, reply.Content); err != nil {
			return nil, err
		}
		if def, ok := a.Agents.Get(agentID); ok && def.Schedule != nil && def.Schedule.Output.Channel != "" {
			if err := a.deliverReply(ctx, def, in, res, reply.Content); err != nil {
				return nil, err
			}
		}
		rec.SessionID, rec.RunID, rec.DeliveryID = res.SessionID, res.RunID, ""
		if res.Delivery != nil {
			rec.DeliveryID = res.Delivery.DeliveryID
		}
	}
	if err := a.Store.FinishScheduleRun(ctx, rec); err != nil {
		return nil, err
	}
	return res, nil
}

// saveFiringExchange stores the firing's session and action-log row unless
// an earlier attempt of the finish step already did.
func (a *ScheduledActivities) saveFiringExchange(ctx context.Context, in workflows.ScheduledFinishInput, runID, reply string) error {
	if _, err := a.Store.AgentRunByID(ctx, runID); err == nil {
		return nil
	}
	var snap workflows.RunSnapshot
	if err := a.Log.Snapshot(ctx, in.Run.Snapshot, &snap); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	now := time.Now().UTC()
	sess := &models.ChatSession{ID: in.SessionID, AgentID: in.Run.AgentID, Subject: in.Run.Subject, UserID: "schedule", Username: "schedule",
		Source: llm.SourceScheduled}
	meta, _ := json.Marshal(map[string]any{"trigger": in.Trigger, "workflow_id": in.Run.WorkflowID})
	run := &models.AgentRun{RunID: runID, ResponseID: "resp-" + firingKey(in.Run.WorkflowID), AgentID: in.Run.AgentID, SessionID: in.SessionID,
		Subject: in.Run.Subject, Source: llm.SourceScheduled, Provider: snap.Agent.Provider, Model: snap.Agent.Model, Status: "succeeded",
		Turns: in.Turns, InputTokens: in.Usage.InputTokens, OutputTokens: in.Usage.OutputTokens, Metadata: string(meta),
		StartedAt: now, FinishedAt: &now}
	msgs := []models.ChatMessage{
		{RunID: runID, Role: llm.RoleUser, Content: snap.Agent.UserText},
		{RunID: runID, Role: llm.RoleAssistant, Content: reply},
	}
	return a.Store.SaveExchange(ctx, sess, run, msgs)
}

// deliverReply creates the delivery record of the firing's reply and puts
// the message for the Delivery workflow in res.
func (a *ScheduledActivities) deliverReply(ctx context.Context, def *agentdef.Definition, in workflows.ScheduledFinishInput, res *workflows.ScheduledRunResult, reply string) error {
	out := def.Schedule.Output
	dest, err := a.Channels.Check(ctx, out.Channel, out.To)
	if err != nil {
		res.Status, res.Error = models.ScheduleRunFailed, fmt.Sprintf("output channel %s cannot take the reply: %v", out.Channel, err)
		return nil
	}
	id := FiringDeliveryID(in.Run.WorkflowID)
	msg, err := delivery.ChannelInput(delivery.ChannelMessage{DeliveryID: id, Channel: out.Channel, Text: reply, To: out.To,
		AgentID: def.ID, Source: delivery.SourceSchedule, SessionID: res.SessionID, RunID: res.RunID, CreatedAt: time.Now().UTC()}, a.Retry)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("encode the reply: "+err.Error(), workflows.ErrTypeRunLog, err)
	}
	res.Delivery = &msg
	res.Destination = delivery.DisplayURL(dest)
	return a.Store.CreateDelivery(ctx, delivery.Record(msg, dest))
}
