package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/internal/runprep"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// PeerActivities are the steps of delegation (PeerPrepare, PeerDone in the
// delegating run) and of the PeerRun child workflow (docs/teams.md).
type PeerActivities struct {
	Store   *models.Store
	Agents  Agents
	Config  *config.Loaded
	Router  *llm.Router
	Toolbox *agent.Toolbox
	Log     *runlog.Log
	Events  Notifier
	// ArtifactsDir holds the peer runs' work directories (peers/<id>).
	ArtifactsDir string
	Workspace    string
	// HeartbeatInterval overrides DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
}

// PeerPrepare checks one ask_<peer> call of a run and prepares the child:
// the peer must be one of the agent's peers, exist and be enabled, not be
// on the run's lineage (a cycle), and the depth and fan-out limits must
// allow it; then the peer's snapshot is resolved and stored (as runprep
// does for a task run), the peer run recorded and run.child_started
// appended. A refused call gets its tool error stored as the call's result
// and nothing started. Repeating it (a crash before the workflow recorded
// it) finds the same record.
func (a *PeerActivities) PeerPrepare(ctx context.Context, in workflows.PeerPrepareInput) (*workflows.PeerPrepared, error) {
	key := in.Parent.Key()
	asked, err := a.Log.At(ctx, key, in.CallSeq)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	if in.Index >= len(asked.ToolCalls) || asked.ToolCalls[in.Index].ID != in.CallID {
		msg := fmt.Sprintf("%v: message %d of run %s has no tool call %s", runlog.ErrOutOfStep, in.CallSeq, key, in.CallID)
		return nil, temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeRunLog, nil)
	}
	call := asked.ToolCalls[in.Index]
	refuse := func(format string, args ...any) (*workflows.PeerPrepared, error) {
		res := agent.ToolResult{Content: fmt.Sprintf(format, args...), IsError: true}
		if err := a.Log.Put(ctx, key, in.ResultSeq, llm.Message{Role: llm.RoleTool, Content: agent.ToolMessageContent(res),
			ToolCallID: call.ID, Name: call.Name}); err != nil {
			return nil, storageFullOr(err)
		}
		res.Content = agent.Summary(res.Content, workflows.ToolSummaryBytes)
		return &workflows.PeerPrepared{Refused: &res}, nil
	}
	d := in.Delegation
	maxDepth, maxChildren := d.Limits()
	var lookup agent.PeerLookup
	if a.Agents != nil {
		lookup = a.Agents.Get
	}
	def, args, err := agent.CheckPeerCall(agent.Delegating{AgentID: in.Parent.AgentID, Peers: d.Peers, Lineage: d.Lineage,
		Depth: d.Depth, MaxDepth: maxDepth, Started: d.Started, MaxChildren: maxChildren}, call.Name, call.Arguments, lookup)
	if err != nil {
		return refuse("%v", err)
	}
	peer := def.ID
	prep, err := runprep.Preparer{Config: a.Config, Router: a.Router, Toolbox: a.Toolbox, Log: a.Log, Agents: a.Agents.Get}.Prepare(ctx,
		runprep.Request{Agent: def, Who: &auth.Principal{Subject: in.Parent.Subject}, SkillInstructions: true, Delegates: true, UserText: args.Task,
			MemorySource: in.ChildWorkflowID})
	var unresolved *runprep.ResolveError
	if errors.As(err, &unresolved) {
		return refuse("peer agent %s cannot run: %v", peer, unresolved.Err)
	}
	if err != nil {
		return nil, storageFullOr(err)
	}
	rec, err := a.Store.CreatePeerRun(ctx, &models.PeerRun{WorkflowID: in.ChildWorkflowID, ParentWorkflowID: in.Parent.WorkflowID,
		ParentRunID: d.RunID, RootRunID: d.RootRunID, RootTaskID: d.RootTaskID, RootTaskRunID: d.RootTaskRunID, AgentID: peer,
		Depth: d.Depth + 1, Ask: args.Task, Snapshot: prep.SHA})
	if err != nil {
		return nil, storageFullOr(err)
	}
	outline := prep.Snapshot.Agent
	if rec.Snapshot != prep.SHA { // prepared before: keep what it was started with
		var snap workflows.RunSnapshot
		if err := a.Log.Snapshot(ctx, rec.Snapshot, &snap); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
		}
		outline = snap.Agent
	}
	a.childEvent(ctx, models.EventRunChildStarted, in.Parent, d, rec, nil)
	ref := workflows.RunRef{RunID: rec.ID, Attempt: 1, AgentID: peer, WorkflowID: in.ChildWorkflowID, Trigger: workflows.TriggerPeer,
		Subject: in.Parent.Subject, DataClassification: def.LLM.DataClassification, Snapshot: rec.Snapshot, RootRunID: d.RootRunID}
	child := &workflows.PeerRunInput{PeerRunID: rec.ID, Run: ref, ParentWorkflowID: in.Parent.WorkflowID, Agent: outline.Outline(),
		Approvals: workflows.PolicyOf(def.Approvals), Deadline: in.Deadline}
	if a.Config != nil {
		child.BudgetWait, child.ToolTimeout = a.Config.Costs.RunBudgetWait, a.Config.Runtime.ToolTimeout
	}
	if len(def.Peers) > 0 {
		child.Delegation = &workflows.Delegation{Peers: def.Peers, Depth: d.Depth + 1, MaxDepth: d.MaxDepth, MaxChildren: d.MaxChildren,
			RunID: rec.LedgerID(), RootRunID: d.RootRunID, RootTaskID: d.RootTaskID, RootTaskRunID: d.RootTaskRunID,
			Lineage: append(append([]string(nil), d.Lineage...), peer)}
	}
	return &workflows.PeerPrepared{Child: child}, nil
}

// PeerDone stores a child's answer (its full reply from its record, or
// why it did not answer) as the result of the parent's ask_<peer> call
// and appends run.child_finished. Repeating it changes nothing.
func (a *PeerActivities) PeerDone(ctx context.Context, in workflows.PeerDoneInput) (agent.ToolResult, error) {
	rec, err := a.Store.PeerRunByID(ctx, in.Result.PeerRunID)
	if err != nil {
		return agent.ToolResult{}, storageFullOr(err)
	}
	res := in.Result
	if res.Status == models.RunFinished && rec.Reply != "" {
		res.Reply = rec.Reply
	}
	content, isErr := workflows.PeerAnswer(rec.AgentID, res)
	out := agent.ToolResult{Content: content, IsError: isErr}
	if err := a.Log.Put(ctx, in.Parent.Key(), in.ResultSeq, llm.Message{Role: llm.RoleTool, Content: agent.ToolMessageContent(out),
		ToolCallID: in.CallID, Name: in.Name}); err != nil {
		return agent.ToolResult{}, storageFullOr(err)
	}
	a.childEvent(ctx, models.EventRunChildFinished, in.Parent, in.Delegation, rec, &res)
	out.Content = agent.Summary(out.Content, workflows.ToolSummaryBytes)
	return out, nil
}

// childEvent appends run.child_started or run.child_finished on the root
// task's run (once per child: dedupe key), with parent and child ids.
func (a *PeerActivities) childEvent(ctx context.Context, typ string, parent workflows.RunRef, d workflows.Delegation, rec *models.PeerRun, res *workflows.PeerRunResult) {
	payload := map[string]any{
		"parent_workflow_id": parent.WorkflowID, "parent_run_id": d.RunID, "parent_agent_id": parent.AgentID,
		"child_workflow_id": rec.WorkflowID, "child_run_id": rec.LedgerID(), "peer_run_id": rec.ID, "peer": rec.AgentID,
		"root_run_id": d.RootRunID, "depth": rec.Depth,
	}
	if res != nil {
		payload["status"], payload["turns"] = res.Status, res.Turns
		payload["input_tokens"], payload["output_tokens"] = res.Usage.InputTokens, res.Usage.OutputTokens
		if fresh, err := a.Store.PeerRunByID(ctx, rec.ID); err == nil {
			payload["cost_micros"] = fresh.CostMicros
		}
		if res.Error != "" {
			payload["error"] = res.Error
		}
	}
	ev := models.NewEvent(typ, typ+":"+rec.WorkflowID, payload)
	ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = d.RootTaskID, d.RootTaskRunID, parent.AgentID, parent.Attempt
	if fresh, err := a.Store.InsertEvent(ctx, &ev); err != nil {
		activity.GetLogger(ctx).Warn(typ+" event not recorded", "child", rec.WorkflowID, "err", err)
	} else if fresh && a.Events != nil {
		a.Events.Notify()
	}
}

// PeerRunStart marks the peer run running.
func (a *PeerActivities) PeerRunStart(ctx context.Context, ref workflows.RunRef) error {
	err := a.Store.MarkPeerRunStarted(ctx, ref.RunID)
	if errors.Is(err, models.ErrNotFound) || errors.Is(err, models.ErrRunNotActive) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	return storageFullOr(err)
}

// PeerRunFinish records the peer run's outcome (the first one wins) with
// its cost from the ledger and, for a finished run, its whole reply from
// the run log (the result's is bounded).
func (a *PeerActivities) PeerRunFinish(ctx context.Context, o workflows.PeerRunOutcome) error {
	r := o.Result
	if r.Status == models.RunFinished {
		if last, err := a.Log.Last(ctx, o.Run.Key()); err == nil && last.Role == llm.RoleAssistant && last.Content != "" {
			r.Reply = last.Content
		}
	}
	_, _, err := a.Store.FinishPeerRun(ctx, o.Run.RunID, models.RunOutcome{Status: r.Status, Error: r.Error, TimedOut: r.TimedOut,
		Reply: r.Reply, StopReason: r.StopReason, Turns: r.Turns, InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens})
	if errors.Is(err, models.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	return storageFullOr(err)
}

// PeerRunWait records a park (budget, cost cap) or resume of the peer run;
// a cost-cap park also moves the root task to needs_review with a comment.
func (a *PeerActivities) PeerRunWait(ctx context.Context, in workflows.RunWaitInput) error {
	if in.WaitingFor == models.WaitingForCostCap {
		err := a.Store.SetPeerRunCostCapWait(ctx, in.Run.RunID, models.RunWait{RunID: in.Run.RunID, Attempt: in.Run.Attempt, Turn: in.Turn,
			WaitingFor: in.WaitingFor, Code: in.Code, Reason: in.Reason, Waited: in.Waited}, !in.Resume)
		if errors.Is(err, models.ErrNotFound) {
			return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
		}
		if err == nil && a.Events != nil {
			a.Events.Notify()
		}
		return storageFullOr(err)
	}
	w := in.WaitingFor
	if in.Resume {
		w = ""
	}
	return storageFullOr(a.Store.SetPeerRunWaiting(ctx, in.Run.RunID, w))
}

// PeerLLMTurn is one LLM turn of a peer run; its ledger row carries the
// tree root's run id and the call carries the tree's cost cap: the root
// task's max_cost_usd, read at every turn (cost admission takes the
// tighter of it and the peer agent's own max_cost_usd, as for a task run).
// The cap counter is the root's (cap:<RootRunID>) for every member of the
// tree.
func (a *PeerActivities) PeerLLMTurn(ctx context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	var capMicros int64
	if in.Run.RootRunID != "" && a.Store != nil {
		var err error
		if capMicros, err = a.Store.RunCostCap(ctx, 0, in.Run.RootRunID); err != nil {
			return nil, err // retried: a turn never runs past a cap it could not read
		}
	}
	return LLMTurn(ctx, a.Log, a.Router, in, llm.CallMeta{
		CallID:    CallID(in.Run, in.Turn),
		Subject:   in.Run.Subject,
		Workspace: a.Workspace,
		AgentID:   in.Run.AgentID,
		SessionID: in.Run.WorkflowID,
		RunID:     models.PeerRunLedgerID(in.Run.RunID),
		RootRunID: in.Run.RootRunID,
		Source:    llm.SourceTask,
		Trigger:   workflows.TriggerPeer,
		// Read at every turn: a raised cap counts from the next turn on.
		CostCapMicros: capMicros,
	})
}

// PeerTool is one tool call of a peer run, in its own work directory
// (peers/<id> in the artifact area). The files it writes stay there; they
// are not attached to the root's task (docs/teams.md).
func (a *PeerActivities) PeerTool(ctx context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
	stop := heartbeat(ctx, a.HeartbeatInterval)
	defer stop()
	dir := filepath.Join(a.ArtifactsDir, "peers", strconv.FormatInt(in.Run.RunID, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agent.ToolResult{}, fmt.Errorf("create work directory of peer run %d: %w", in.Run.RunID, err)
	}
	return ToolStep(ctx, a.Log, a.Toolbox, dir, in, func(agent.ProducedFile) (bool, error) { return false, nil }, func() {})
}

// storageFullOr is storageFull(err) when the database is full, else err.
func storageFullOr(err error) error {
	if full := storageFull(err); full != nil {
		return full
	}
	return err
}
