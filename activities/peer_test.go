package activities

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// PeerPrepare refuses what must not start (not a peer, a cycle, the depth
// and fan-out limits, an unknown or disabled peer, no task) with a tool
// error stored as the call's result and no peer run recorded; an allowed
// call records one peer run (once, however often the step repeats) and
// run.child_started.
func TestPeerPrepareChecksAndRecords(t *testing.T) {
	d := newPrepDeps(t)
	ctx := context.Background()
	off := false
	d.agents["research"] = &agentdef.Definition{ID: "research", Description: "finds facts", Peers: []string{"fact"}}
	d.agents["fact"] = &agentdef.Definition{ID: "fact"}
	d.agents["sleepy"] = &agentdef.Definition{ID: "sleepy", Enabled: &off}
	a := &PeerActivities{Store: d.store, Agents: d.agents, Config: d.cfg, Router: d.router, Toolbox: d.toolbox, Log: d.log}
	parent := workflows.RunRef{TaskID: 1, RunID: 1, Attempt: 1, AgentID: "lead", WorkflowID: "task-1", Subject: "admin"}
	base := workflows.Delegation{Peers: []string{"research", "sleepy", "ghost", "lead"}, RunID: "taskrun-1", RootRunID: "taskrun-1",
		RootTaskID: 1, RootTaskRunID: 1, Lineage: []string{"lead"}}
	seq := 0
	ask := func(tool, task string, del workflows.Delegation) (*workflows.PeerPrepared, workflows.PeerPrepareInput) {
		t.Helper()
		seq += 2
		args, _ := json.Marshal(map[string]string{"task": task})
		call := llm.ToolCall{ID: "c" + tool, Name: tool, Arguments: args}
		if err := d.log.Put(ctx, parent.Key(), seq, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}); err != nil {
			t.Fatal(err)
		}
		in := workflows.PeerPrepareInput{Parent: parent, Delegation: del, Turn: seq, CallSeq: seq, ResultSeq: seq + 1, CallID: call.ID,
			Name: tool, ChildWorkflowID: workflows.PeerRunWorkflowID(parent, seq, 0)}
		out, err := a.PeerPrepare(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out, in
	}
	deep, full := base, base
	deep.Depth = workflows.DefaultPeerMaxDepth
	full.Started = workflows.DefaultPeerMaxChildren
	for _, c := range []struct {
		tool, task string
		del        workflows.Delegation
		want       string
	}{
		{"ask_writer", "x", base, "not a peer of agent lead"},
		{"ask_lead", "x", base, "delegation cycle: lead -> lead"},
		{"ask_research", "x", deep, "depth limit reached (3)"},
		{"ask_research", "x", full, "at most 8 peer runs"},
		{"ask_ghost", "x", base, "ghost does not exist"},
		{"ask_sleepy", "x", base, "sleepy is disabled"},
		{"ask_research", "", base, "task is required"},
	} {
		out, in := ask(c.tool, c.task, c.del)
		if out.Refused == nil || out.Child != nil || !strings.Contains(out.Refused.Content, c.want) {
			t.Errorf("%s %+v: %+v", c.tool, c.del, out)
			continue
		}
		stored, err := d.log.At(ctx, parent.Key(), in.ResultSeq)
		if err != nil || stored.Role != llm.RoleTool || !strings.HasPrefix(stored.Content, "error: ") || stored.ToolCallID != in.CallID {
			t.Errorf("%s: stored result %+v %v", c.tool, stored, err)
		}
	}
	if runs, _ := d.store.PeerRunsOfRoot(ctx, "taskrun-1"); len(runs) != 0 {
		t.Fatalf("refused calls recorded %d peer runs", len(runs))
	}

	out, in := ask("ask_research", "find the facts", base)
	if out.Child == nil {
		t.Fatalf("refused: %+v", out.Refused)
	}
	again, err := a.PeerPrepare(ctx, in) // a repeated step
	if err != nil || again.Child == nil || again.Child.PeerRunID != out.Child.PeerRunID {
		t.Fatalf("repeat: %+v %v", again, err)
	}
	c := out.Child
	if c.Run.WorkflowID != in.ChildWorkflowID || c.Run.RootRunID != "taskrun-1" || c.Run.TaskID != 0 || c.Run.Trigger != workflows.TriggerPeer {
		t.Errorf("child ref %+v", c.Run)
	}
	if c.Delegation == nil || c.Delegation.Depth != 1 || c.Delegation.RunID != models.PeerRunLedgerID(c.PeerRunID) ||
		strings.Join(c.Delegation.Lineage, ",") != "lead,research" {
		t.Errorf("child delegation %+v", c.Delegation)
	}
	runs, _ := d.store.PeerRunsOfRoot(ctx, "taskrun-1")
	if len(runs) != 1 || runs[0].Ask != "find the facts" || runs[0].ParentRunID != "taskrun-1" || runs[0].Depth != 1 {
		t.Fatalf("peer runs %+v", runs)
	}
	evs, _ := d.store.EventsAfter(ctx, 0, models.EventFilter{TypePrefixes: []string{models.EventRunChildStarted}}, 10)
	if len(evs) != 1 || !strings.Contains(evs[0].Payload, `"child_workflow_id":"`+in.ChildWorkflowID+`"`) ||
		!strings.Contains(evs[0].Payload, `"parent_workflow_id":"task-1"`) {
		t.Fatalf("child_started events %+v", evs)
	}

	// The answer goes back as the tool result; the tree's cost is the
	// root's ledger rows and the peer's.
	if err := a.PeerRunFinish(ctx, workflows.PeerRunOutcome{Run: c.Run, Result: workflows.PeerRunResult{Status: models.RunFinished, Reply: "facts"}}); err != nil {
		t.Fatal(err)
	}
	res, err := a.PeerDone(ctx, workflows.PeerDoneInput{Parent: parent, Delegation: base, ResultSeq: 99, CallID: "cx", Name: "ask_research",
		ChildWorkflowID: in.ChildWorkflowID, Result: workflows.PeerRunResult{PeerRunID: c.PeerRunID, Status: models.RunFinished, Reply: "facts"}})
	if err != nil || res.IsError || res.Content != "facts" {
		t.Fatalf("done: %+v %v", res, err)
	}
	if m, err := d.log.At(ctx, parent.Key(), 99); err != nil || m.Content != "facts" || m.Name != "ask_research" {
		t.Fatalf("stored answer %+v %v", m, err)
	}
	for id, micros := range map[string]int64{"taskrun-1": 100, models.PeerRunLedgerID(c.PeerRunID): 250, "taskrun-2": 1000} {
		if err := d.store.DB.Create(&models.LedgerEntry{CallID: id + "-t1", RunID: id, CostMicros: micros}).Error; err != nil {
			t.Fatal(err)
		}
	}
	if cost, err := d.store.TreeCostMicros(ctx, "taskrun-1"); err != nil || cost != 350 {
		t.Fatalf("tree cost %d %v", cost, err)
	}
}
