package chat

import (
	"context"
	"log/slog"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/detached"
)

// archive keeps a finished exchange (the user's message and the reply) of
// an agent with memory searchable (memory.archive, docs/memory.md). The
// exchange is already saved: a failure is logged, not the caller's.
func (s *Service) archive(ctx context.Context, def *agentdef.Definition, scope agent.MemoryScope, text, reply string) {
	if s.Memory == nil || !def.Memory.ArchiveOn(s.Memory.Archive) {
		return
	}
	if err := s.Memory.ArchiveConversation(detached.Context(ctx), scope, "user: "+text+"\nassistant: "+reply); err != nil {
		slog.Warn("memory: archive a chat exchange", "agent", def.ID, "session", scope.Source, "error", err)
	}
}
