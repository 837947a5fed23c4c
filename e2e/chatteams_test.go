package e2e

import (
	"encoding/json"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
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
