// Package runprep prepares a durable agent run: it resolves the agent's
// settings (provider, model, tools, limits) for the run's principal and
// stores the result as the run's snapshot in the run log, by content hash.
// Task runs (internal/taskruns), scheduled firings and asynchronous webhook
// runs (activities) all start this way; what differs between them (how a
// missing agent is reported, the prompt, the principal) stays with the
// caller.
//
// The snapshot is what makes a run reproducible: a later change of the
// agent file never changes a run that already started, nor a retry of it.
package runprep

import (
	"context"
	"fmt"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/workflows"
)

// SnapshotStore keeps run snapshots by content hash (*runlog.Log).
type SnapshotStore interface {
	PutSnapshot(ctx context.Context, v any) (string, error)
}

// Preparer resolves agents for runs and stores their snapshots. It is a
// small value: callers build it from the fields they already hold.
type Preparer struct {
	Config  *config.Loaded
	Router  *llm.Router
	Toolbox *agent.Toolbox
	Log     SnapshotStore
	// Agents describes an agent's peers for its ask_<peer> tools (nil: the
	// tools name the peers only).
	Agents agent.PeerLookup
}

// Request is one run to prepare.
type Request struct {
	// Agent is the definition the run uses; the caller has checked that it
	// exists and is enabled (each kind of run reports that differently).
	Agent *agentdef.Definition
	// Who runs it: overrides and the ledger subject follow the principal.
	Who *auth.Principal
	// SkillInstructions appends the agent's skills' instructions to its
	// system prompt (Toolbox.SystemPrompt). Task runs do; firings and
	// webhook runs send the agent's system prompt as written.
	SkillInstructions bool
	// Delegates gives the model the agent's ask_<peer> tools: the run
	// delegates (docs/teams.md; task runs and peer runs do).
	Delegates bool
	// UserText is the run's first user message.
	UserText string
	// MemoryUser and MemorySource scope the memory of an agent with
	// memory: the end user the principal speaks for ("" the principal
	// itself) and where the run's memories come from (task-<id>, a
	// session id). The scope is the principal's subject and this user.
	MemoryUser, MemorySource string
	// History, when set, loads the conversation so far. It is called only
	// once the agent resolved: a run that cannot start reads nothing.
	History func(ctx context.Context) ([]llm.Message, error)
}

// Prepared is a prepared run: its snapshot and the snapshot's hash, which
// the run's workflow input carries instead of the value.
type Prepared struct {
	Snapshot workflows.RunSnapshot
	SHA      string
}

// ResolveError is an agent whose settings do not resolve for this run (an
// unknown provider or model, a refused override). Nothing was stored. Its
// message is the resolver's, and it unwraps to the resolver's error.
type ResolveError struct{ Err error }

func (e *ResolveError) Error() string { return e.Err.Error() }
func (e *ResolveError) Unwrap() error { return e.Err }

// Prepare resolves req.Agent for req.Who and stores the snapshot. Errors:
// *ResolveError when the agent does not resolve; otherwise the history's
// or the run log's error, unchanged.
func (p Preparer) Prepare(ctx context.Context, req Request) (*Prepared, error) {
	def := req.Agent
	tools := p.Toolbox.Tools(def)
	if req.Delegates {
		tools = append(tools, agent.PeerTools(def, p.Agents)...)
	}
	set, err := chat.Resolve(&p.Config.Config, p.Router, def, tools, nil, req.Who)
	if err != nil {
		return nil, &ResolveError{Err: err}
	}
	var history []llm.Message
	if req.History != nil {
		if history, err = req.History(ctx); err != nil {
			return nil, err
		}
	}
	var scope *agent.MemoryScope
	if def.Memory.On() {
		subject := "anonymous"
		if req.Who != nil {
			subject = req.Who.Subject
		}
		scope = &agent.MemoryScope{AgentID: def.ID, Subject: subject, UserID: req.MemoryUser, Source: req.MemorySource,
			Archive: def.Memory.ArchiveOn(p.Config.Memory.Archive)}
	}
	system := def.SystemPrompt
	if scope != nil {
		// The hot memories as of now are part of the snapshot: a retry
		// sends the same prompt.
		if system, err = p.Toolbox.SystemPromptWithMemory(ctx, def, req.SkillInstructions, *scope); err != nil {
			return nil, fmt.Errorf("read the agent's memory: %w", err)
		}
	} else if req.SkillInstructions {
		system = p.Toolbox.SystemPrompt(def)
	}
	// The passages of the agent's knowledge bases for the first message
	// are part of the snapshot: a retry or a replay sees the same prompt.
	system = p.Toolbox.WithKnowledge(ctx, def, system, req.UserText, llm.CallMeta{Subject: req.Who.CostSubject(""), AgentID: def.ID})
	snap := workflows.RunSnapshot{Builtins: def.ToolGrants(), Memory: scope, Agent: agent.Input{
		Provider: set.Provider, Model: set.Model, SystemPrompt: system, History: history, UserText: req.UserText,
		Tools: set.Tools, ToolChoice: set.ToolChoice, Temperature: set.Temperature, MaxTokens: set.MaxTokens,
		MaxTurns: set.MaxTurns, PromptCaching: set.Caching,
	}}
	sha, err := p.Log.PutSnapshot(ctx, snap)
	if err != nil {
		return nil, err
	}
	return &Prepared{Snapshot: snap, SHA: sha}, nil
}
