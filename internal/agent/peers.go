package agent

import (
	"encoding/json"
	"fmt"

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
