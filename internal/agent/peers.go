package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
)

// PeerArgs are the arguments of an ask_<peer> tool call.
type PeerArgs struct {
	Task string `json:"task"`
}

var peerParams = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"What the peer should do: the whole task, with everything it needs to know (it does not see this conversation)."}},"required":["task"]}`)

// PeerLookup finds an agent definition by id (*agentdef.Registry.Get).
type PeerLookup func(id string) (*agentdef.Definition, bool)

// PeerTools are the ask_<peer> tools of an agent with peers (docs/teams.md),
// one per peer, described by the peer's description (lookup may be nil:
// the description then names the peer only).
func PeerTools(def *agentdef.Definition, lookup PeerLookup) []llm.Tool {
	var out []llm.Tool
	for _, id := range def.Peers {
		desc := ""
		if lookup != nil {
			if p, ok := lookup(id); ok {
				desc = p.Description
				if desc == "" {
					desc = p.DisplayName()
				}
			}
		}
		if desc == "" {
			desc = id
		}
		out = append(out, llm.Tool{Name: agentdef.PeerToolName(id), Parameters: peerParams,
			Description: fmt.Sprintf("Delegate a task to the peer agent %s and get its answer. %s", id, desc)})
	}
	return out
}

// DecodePeerArgs reads an ask_<peer> call's arguments: a non-empty task.
func DecodePeerArgs(raw json.RawMessage) (PeerArgs, error) {
	var a PeerArgs
	if err := decodeArgs(raw, &a); err != nil {
		return a, err
	}
	if a.Task == "" {
		return a, fmt.Errorf("task is required: say what the peer should do")
	}
	return a, nil
}

// Delegating is what a run knows of its place in a delegation tree, for
// the checks of an ask_<peer> call (CheckPeerCall): durable runs (the
// activities' PeerPrepare) and chat (in process) share them.
type Delegating struct {
	// AgentID is the asking agent, Peers its peers.
	AgentID string
	Peers   []string
	// Lineage are the agent ids from the root to this run (this run's last).
	Lineage []string
	// Depth is this run's depth (0: the root); Started how many peer runs
	// it started so far. MaxDepth and MaxChildren are the limits in force.
	Depth, MaxDepth, Started, MaxChildren int
}

// CheckPeerCall checks one ask_<peer> call: the peer must be one of the
// agent's peers, not on the run's lineage (a cycle), within the depth and
// fan-out limits, exist (lookup) and be enabled, and the task must not be
// empty. A refusal is the error, whose text is the tool error the model
// sees; nothing has been started.
func CheckPeerCall(d Delegating, tool string, raw json.RawMessage, lookup PeerLookup) (*agentdef.Definition, PeerArgs, error) {
	peer, _ := agentdef.PeerOfTool(tool)
	switch {
	case !slices.Contains(d.Peers, peer):
		return nil, PeerArgs{}, fmt.Errorf("%s is not a peer of agent %s (its peers: %s)", peer, d.AgentID, strings.Join(d.Peers, ", "))
	case slices.Contains(d.Lineage, peer):
		return nil, PeerArgs{}, fmt.Errorf("delegation cycle: %s -> %s; %s is already working on this task tree", strings.Join(d.Lineage, " -> "), peer, peer)
	case d.Depth+1 > d.MaxDepth:
		return nil, PeerArgs{}, fmt.Errorf("delegation depth limit reached (%d): %s cannot delegate further; do the work yourself", d.MaxDepth, d.AgentID)
	case d.Started >= d.MaxChildren:
		return nil, PeerArgs{}, fmt.Errorf("delegation limit reached: a run may start at most %d peer runs", d.MaxChildren)
	}
	var def *agentdef.Definition
	ok := false
	if lookup != nil {
		def, ok = lookup(peer)
	}
	if !ok {
		return nil, PeerArgs{}, fmt.Errorf("peer agent %s does not exist", peer)
	}
	if !def.IsEnabled() {
		return nil, PeerArgs{}, fmt.Errorf("peer agent %s is disabled", peer)
	}
	args, err := DecodePeerArgs(raw)
	if err != nil {
		return nil, PeerArgs{}, err
	}
	return def, args, nil
}
