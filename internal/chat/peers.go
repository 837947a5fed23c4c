package chat

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
)

// Delegation in chat (docs/teams.md, "In chat"): an agent with peers gets
// its ask_<peer> tools here too; a call runs the peer's agent loop in
// process, through the same router (admission, settlement, ledger), with
// the checks and limits of a durable run (agent.CheckPeerCall, depth
// MaxPeerDepth, fan-out MaxPeerChildren per run). The peer's ledger rows
// carry the exchange's run id as their root run id.

// The limits, the durable runs' defaults (workflows.DefaultPeerMaxDepth and
// DefaultPeerMaxChildren; a test in this package keeps them equal).
const (
	MaxPeerDepth    = 3
	MaxPeerChildren = 8
)

// chatDelegation is a run's place in the chat's delegation tree.
type chatDelegation struct {
	agent.Delegating
	rootRunID string
}

// rootDelegation is the delegation state of an exchange's own agent (nil:
// it has no peers).
func rootDelegation(def *agentdef.Definition, runID string) *chatDelegation {
	if len(def.Peers) == 0 {
		return nil
	}
	return &chatDelegation{rootRunID: runID, Delegating: agent.Delegating{AgentID: def.ID, Peers: def.Peers,
		Lineage: []string{def.ID}, MaxDepth: MaxPeerDepth, MaxChildren: MaxPeerChildren}}
}

// withPeerTools adds the agent's ask_<peer> tools to its settings.
func (s *Service) withPeerTools(def *agentdef.Definition, set Settings) Settings {
	if len(def.Peers) > 0 {
		set.Tools = append(append([]llm.Tool(nil), set.Tools...), agent.PeerTools(def, s.Agents.Get)...)
	}
	return set
}

// delegate runs one ask_<peer> call of the exchange in process: checked
// (a refusal is a tool error the model sees, nothing run), then the peer's
// own definition, prompt, tools and settings, its task as its first and
// only message, its reply the tool result. A peer that fails is a tool
// error for the asking model (it decides), as in a durable run; a
// cancelled exchange, and the cost governance's refusals (budget,
// confirmation, policy, rate), end the exchange with that error.
func (e *inProcess) delegate(inv agent.ToolInvocation) (agent.ToolResult, error) {
	d := e.deleg
	refuse := func(format string, args ...any) (agent.ToolResult, error) {
		return agent.ToolResult{Content: fmt.Sprintf(format, args...), IsError: true}, nil
	}
	def, args, err := agent.CheckPeerCall(d.Delegating, inv.Call.Name, inv.Call.Arguments, e.svc.Agents.Get)
	if err != nil {
		return refuse("%v", err)
	}
	set, err := Resolve(&e.svc.Config.Config, e.svc.Router, def, e.svc.Toolbox.Tools(def), nil, auth.FromContext(e.ctx))
	if err != nil {
		return refuse("peer agent %s cannot run: %v", def.ID, err)
	}
	d.Started++
	scope := agent.MemoryScope{AgentID: def.ID, Subject: e.scope.Subject, UserID: e.scope.UserID, Source: e.scope.Source}
	system, err := e.svc.Toolbox.SystemPromptWithMemory(e.ctx, def, true, scope)
	if err != nil {
		return refuse("peer agent %s cannot run: read its memory: %v", def.ID, err)
	}
	child := &inProcess{ctx: agent.WithMemoryScope(e.ctx, scope), svc: e.svc, def: def, set: e.svc.withPeerTools(def, set), meta: e.meta, scope: scope}
	// The peer's own run id in the ledger, readable from its parent's
	// (run_x-peer-1-0, a grandchild run_x-peer-1-0-peer-2-0).
	child.meta.RunID = e.meta.RunID + "-peer-" + strconv.Itoa(inv.Turn) + "-" + strconv.Itoa(inv.Index)
	child.meta.RootRunID = d.rootRunID
	child.meta.AgentID = def.ID
	child.meta.DataClassification = def.LLM.DataClassification
	if len(def.Peers) > 0 {
		child.deleg = &chatDelegation{rootRunID: d.rootRunID, Delegating: agent.Delegating{AgentID: def.ID, Peers: def.Peers,
			Lineage: append(append([]string(nil), d.Lineage...), def.ID), Depth: d.Depth + 1, MaxDepth: d.MaxDepth, MaxChildren: d.MaxChildren}}
	}
	out, err := agent.Run(child, agent.Input{Provider: child.set.Provider, Model: child.set.Model,
		SystemPrompt: e.svc.Toolbox.WithKnowledge(child.ctx, def, system, args.Task, child.meta), UserText: args.Task,
		Tools: child.set.Tools, ToolChoice: child.set.ToolChoice, Temperature: child.set.Temperature, MaxTokens: child.set.MaxTokens,
		MaxTurns: child.set.MaxTurns, PromptCaching: child.set.Caching})
	if err != nil {
		if e.ctx.Err() != nil || endsExchange(err) {
			return agent.ToolResult{}, err
		}
		return refuse("peer %s failed: %s", def.ID, strings.TrimSpace(err.Error()))
	}
	return agent.ToolResult{Content: out.Reply}, nil
}

// endsExchange tells whether a peer's error is the exchange's own: the
// cost governance refused (a budget, a confirmation, a policy, a rate
// limit): the asking model's next call would meet it too, and the caller
// should see its status.
func endsExchange(err error) bool {
	f, ok := fault.As(err)
	if !ok {
		return false
	}
	switch f.Fault().Kind {
	case fault.KindBudget, fault.KindForbidden, fault.KindConflict, fault.KindOverloaded:
		return true
	}
	return false
}
