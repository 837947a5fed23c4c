package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/models"
)

// TestChatDelegationInProcess: in chat an agent with peers delegates in
// process (docs/teams.md, "In chat"): c0 asks c1, which asks c2, which asks
// c3; c3 is at the depth limit (3) and its ask of c4 is a tool error its
// model sees, as is asking a disabled peer. The answer climbs back to the user, and every ledger row of
// the tree carries the exchange's run id as root_run_id.
func TestChatDelegationInProcess(t *testing.T) {
	agents := map[string]string{}
	agents["coff.yaml"] = "id: coff\nenabled: false\nllm: {provider: openai, model: exact}\n"
	for i, peers := range []string{"[c1, coff]", "[c2]", "[c3]", "[c4]", "[]"} {
		id := "c" + string(rune('0'+i))
		agents[id+".yaml"] = "id: " + id + "\ndescription: chain step " + id + "\nllm: {provider: openai, model: exact}\npeers: " + peers + "\nmax_turns: 3\n"
	}
	fake := startFake(t)
	u := &fakellm.Usage{InputTokens: 10, OutputTokens: 100}
	ask := func(peer, task string) []fakellm.ToolCall {
		return []fakellm.ToolCall{fakellm.NewToolCall("ask_"+peer, map[string]string{"task": task})}
	}
	fake.Script(
		fakellm.Rule{Contains: "One done D1", Reply: "Chain done.", Usage: u},
		fakellm.Rule{Contains: "Two done D2", Reply: "One done D1", Usage: u},
		fakellm.Rule{Contains: "Three saw limit L3", Reply: "Two done D2", Usage: u},
		fakellm.Rule{Contains: "delegation depth limit reached (3)", Reply: "Three saw limit L3", Usage: u},
		fakellm.Rule{Contains: "Step three S3", ToolCalls: ask("c4", "Step four S4"), Usage: u},
		fakellm.Rule{Contains: "Step two S2", ToolCalls: ask("c3", "Step three S3"), Usage: u},
		fakellm.Rule{Contains: "Step one S1", ToolCalls: ask("c2", "Step two S2"), Usage: u},
		fakellm.Rule{Contains: "peer agent coff is disabled", Reply: "Saw disabled.", Usage: u},
		fakellm.Rule{Contains: "Ask the disabled one", ToolCalls: ask("coff", "Anything"), Usage: u},
		fakellm.Rule{Contains: "Chain report", ToolCalls: ask("c1", "Step one S1"), Usage: u},
	)
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: agents, Config: teamConfig})
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "c0", "text": "Chain report"})
	if r.Status != 200 || r.JSON["reply"] != "Chain done." {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
	runID, _ := r.JSON["run_id"].(string)
	if n := fake.CallCount(); n != 8 {
		t.Fatalf("provider calls: %d, want 8 (two per agent c0..c3, none for c4)", n)
	}
	l := g.Do("GET", "/api/v1/costs/calls?limit=100&root_run_id="+runID, nil)
	var out struct {
		Calls []struct {
			AgentID    string `json:"agent_id"`
			RunID      string `json:"run_id"`
			RootRunID  string `json:"root_run_id"`
			CostMicros int64  `json:"cost_micros"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(l.Raw, &out); err != nil || l.Status != 200 {
		t.Fatalf("ledger: %d %s", l.Status, l.Raw)
	}
	per := map[string]int{}
	runs := map[string]string{}
	for _, c := range out.Calls {
		if c.RootRunID != runID {
			t.Errorf("row %+v: root_run_id is not the exchange's %s", c, runID)
		}
		per[c.AgentID]++
		runs[c.AgentID] = c.RunID
	}
	if len(out.Calls) != 8 || per["c0"] != 2 || per["c1"] != 2 || per["c2"] != 2 || per["c3"] != 2 {
		t.Fatalf("tree ledger rows per agent: %v (%d rows)", per, len(out.Calls))
	}
	if runs["c0"] != runID || runs["c1"] != runID+"-peer-1-0" || runs["c3"] != runID+"-peer-1-0-peer-1-0-peer-1-0" {
		t.Fatalf("run ids: %v", runs)
	}

	// A disabled peer: a tool error the model sees, nothing run for it.
	r = g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "c0", "text": "Ask the disabled one", "session_id": r.JSON["session_id"]})
	if r.Status != 200 || r.JSON["reply"] != "Saw disabled." || fake.CallCount() != 10 {
		t.Fatalf("disabled peer: %d %s (provider calls %d)", r.Status, r.Raw, fake.CallCount())
	}
}

// TestFiringDelegatesToPeer: a scheduled agent with peers delegates from
// its firing as a task run does: the peer runs as a child workflow (a
// peer run recorded under the firing), its answer is the firing's tool
// result, and the tree's ledger rows carry the firing's run id as root.
func TestFiringDelegatesToPeer(t *testing.T) {
	fake := startFake(t)
	u := &fakellm.Usage{InputTokens: 10, OutputTokens: 100}
	fake.Script(
		fakellm.Rule{Contains: "Facts FR1.", Reply: "Firing report done.", Usage: u},
		fakellm.Rule{Contains: "Find facts FR1", Reply: "Facts FR1.", Usage: u},
		fakellm.Rule{Contains: "Firing report please", Usage: u,
			ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("ask_fr", map[string]string{"task": "Find facts FR1"})}},
	)
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: teamConfig, Agents: map[string]string{
		"fl.yaml": "id: fl\ntrigger: cron\nllm: {provider: openai, model: exact}\npeers: [fr]\nmax_turns: 4\n" +
			"schedule: {cron: \"0 0 1 1 *\", prompt: Firing report please}\n",
		"fr.yaml": "id: fr\ndescription: finds facts\nllm: {provider: openai, model: exact}\nmax_turns: 2\n",
	}})
	deleteScheduleAfter(t, gatewaytest.SharedTemporal(t), g.Config.Temporal.TaskQueue+":schedule:fl")
	tr := g.Do("POST", "/api/v1/schedules/fl/trigger", nil)
	wid, _ := tr.JSON["workflow_id"].(string)
	if tr.Status != 202 || wid == "" {
		t.Fatalf("trigger: %d %s", tr.Status, tr.Raw)
	}
	var run models.ScheduleRun
	waitUntil(t, 30*time.Second, "the firing", func() bool {
		return g.Store.DB.First(&run, "workflow_id = ?", wid).Error == nil && run.Status != "running"
	})
	if run.Status != "succeeded" {
		t.Fatalf("firing %+v", run)
	}
	root := activities.FiringRunID(wid)
	var peers []models.PeerRun
	if err := g.Store.DB.Find(&peers, "root_run_id = ?", root).Error; err != nil || len(peers) != 1 ||
		peers[0].AgentID != "fr" || peers[0].Status != "finished" || peers[0].Reply != "Facts FR1." || peers[0].ParentWorkflowID != wid {
		t.Fatalf("peer runs of the firing: %+v %v", peers, err)
	}
	per := map[string]int{}
	for _, c := range ledger(t, g, "root_run_id="+root) {
		per[c.RunID]++
	}
	if per[root] != 2 || per[peers[0].LedgerID()] != 1 || len(per) != 2 || fake.CallCount() != 3 {
		t.Fatalf("tree ledger rows by run: %v (provider calls %d)", per, fake.CallCount())
	}
}
