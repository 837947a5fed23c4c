package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
)

// CheckPeerCall refuses, with the text the model sees, every call the
// durable runs and chat must not run; the first check that fails wins.
func TestCheckPeerCallRefusals(t *testing.T) {
	off := false
	defs := map[string]*agentdef.Definition{"b": {ID: "b"}, "c": {ID: "c"}, "off": {ID: "off", Enabled: &off}}
	lookup := func(id string) (*agentdef.Definition, bool) { d, ok := defs[id]; return d, ok }
	base := agent.Delegating{AgentID: "a", Peers: []string{"b", "c", "off", "gone"}, Lineage: []string{"a"}, MaxDepth: 3, MaxChildren: 8}
	task := json.RawMessage(`{"task":"do it"}`)
	cases := []struct {
		name string
		d    func(agent.Delegating) agent.Delegating
		tool string
		args json.RawMessage
		want string
	}{
		{"not a peer", nil, "ask_z", task, "z is not a peer of agent a"},
		{"cycle", func(d agent.Delegating) agent.Delegating { d.Lineage = []string{"c", "a"}; return d }, "ask_c", task, "delegation cycle: c -> a -> c"},
		{"depth", func(d agent.Delegating) agent.Delegating { d.Depth = 3; return d }, "ask_b", task, "delegation depth limit reached (3)"},
		{"fan-out", func(d agent.Delegating) agent.Delegating { d.Started = 8; return d }, "ask_b", task, "at most 8 peer runs"},
		{"unknown", nil, "ask_gone", task, "peer agent gone does not exist"},
		{"disabled", nil, "ask_off", task, "peer agent off is disabled"},
		{"empty task", nil, "ask_b", json.RawMessage(`{"task":""}`), "task is required"},
	}
	for _, c := range cases {
		d := base
		if c.d != nil {
			d = c.d(d)
		}
		_, _, err := agent.CheckPeerCall(d, c.tool, c.args, lookup)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	def, args, err := agent.CheckPeerCall(base, "ask_b", task, lookup)
	if err != nil || def.ID != "b" || args.Task != "do it" {
		t.Fatalf("allowed call: %v %v %+v", def, err, args)
	}
}
