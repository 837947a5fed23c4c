package agent

import (
	"context"
	"strings"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
)

// MemoryScope is whose memory a run reads and writes (docs/memory.md): the
// agent, the authenticated subject and the end user it named. Chat sets it
// per request; a durable run carries it in its snapshot.
type MemoryScope struct {
	AgentID string `json:"agent_id"`
	Subject string `json:"subject"`
	UserID  string `json:"user_id,omitempty"`
	// Source is where memories written in the run come from (a session id,
	// task-<id>).
	Source string `json:"source,omitempty"`
	// Archive: the run's conversation is archived when it finishes (the
	// agent's memory.archive, else the configuration's).
	Archive bool `json:"archive,omitempty"`
}

// Memory is the memory service as the toolbox sees it (internal/memory).
type Memory interface {
	// Tools are the schemas of the memory tools def is granted.
	Tools(def *agentdef.Definition) []llm.Tool
	// Call runs one memory tool for scope. Problems the model caused are
	// error results; an error is the store's.
	Call(ctx context.Context, scope MemoryScope, call llm.ToolCall) (ToolResult, error)
	// Pinned is the hot-memory block appended to def's system prompt for
	// scope ("" when there is none).
	Pinned(ctx context.Context, def *agentdef.Definition, scope MemoryScope) (string, error)
	// ArchiveConversation keeps a finished conversation of scope
	// searchable.
	ArchiveConversation(ctx context.Context, scope MemoryScope, text string) error
}

type memoryScopeKey struct{}

// WithMemoryScope is ctx carrying the memory scope of the run its tool
// calls belong to.
func WithMemoryScope(ctx context.Context, s MemoryScope) context.Context {
	return context.WithValue(ctx, memoryScopeKey{}, s)
}

// MemoryScopeFrom is the scope WithMemoryScope stored.
func MemoryScopeFrom(ctx context.Context) (MemoryScope, bool) {
	s, ok := ctx.Value(memoryScopeKey{}).(MemoryScope)
	return s, ok
}

// isMemoryTool reports whether name is one of the memory tools.
func isMemoryTool(name string) bool { return strings.HasPrefix(name, "memory_") }

// memoryTools are the memory tools' schemas for def (none without a
// memory service or when def does not opt in).
func (t *Toolbox) memoryTools(def *agentdef.Definition) []llm.Tool {
	if t == nil || t.Memory == nil || !def.Memory.On() {
		return nil
	}
	return t.Memory.Tools(def)
}

// callMemory runs a memory tool in the scope ctx carries.
func (t *Toolbox) callMemory(ctx context.Context, call llm.ToolCall) (ToolResult, error) {
	scope, ok := MemoryScopeFrom(ctx)
	if t.Memory == nil || !ok {
		return ToolResult{Content: "memory is not available in this run", IsError: true}, nil
	}
	return t.Memory.Call(ctx, scope, call)
}

// SystemPromptWithMemory is SystemPrompt followed by the hot memories of
// scope, for an agent that opts into memory (chat, task runs, firings).
func (t *Toolbox) SystemPromptWithMemory(ctx context.Context, def *agentdef.Definition, skills bool, scope MemoryScope) (string, error) {
	system := def.SystemPrompt
	if skills {
		system = t.SystemPrompt(def)
	}
	if t == nil || t.Memory == nil || !def.Memory.HotOn() {
		return system, nil
	}
	pinned, err := t.Memory.Pinned(ctx, def, scope)
	if err != nil || pinned == "" {
		return system, err
	}
	if system == "" {
		return pinned, nil
	}
	return system + "\n\n" + pinned, nil
}
