package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/embedding"
	"github.com/agentryhq/agentry/internal/knowledge"
)

// KnowledgeSweepInterval is how often documents still queued or indexing
// are reconciled with their workflows (one that ended without recording a
// result is failed; one whose workflow never started is started).
var KnowledgeSweepInterval = time.Minute

// addKnowledge wires knowledge bases (docs/knowledge.md): the vector store
// on the application database, the embedder of knowledge.embedding through
// the Router (so cost governance admits and records every call), the
// service behind the KnowledgeIngest workflow's steps, the passages and the
// knowledge_search tool of agents that name bases, and the check of the
// bases agent definitions name. Without bases nothing runs.
func (s *Services) addKnowledge(ctx context.Context) error {
	cfg, g := s.gw.Config, s.gw
	k := &cfg.Knowledge
	ids := make([]string, 0, len(k.Bases))
	for id := range k.Bases {
		ids = append(ids, id)
	}
	// Definitions naming a base that is not configured are refused with
	// their file and line.
	s.Agents.SetRefs(agentdef.Refs{KnowledgeBases: ids})
	s.Knowledge = &knowledge.Service{Config: k, Workspace: cfg.Workspace.Root, Store: g.Store, Temporal: g.Temporal,
		TaskQueue: cfg.Temporal.TaskQueue, SSRF: SSRFPolicy(&cfg.Config), BudgetWait: cfg.Costs.RunBudgetWait, Log: s.log}
	if len(ids) == 0 {
		return nil
	}
	s.Knowledge.Vectors = s.Vectors // addVectors ran first
	if k.Embedding.Model != "" {
		emb, err := embedding.New(s.Router, embedding.Options{Provider: k.Embedding.Provider, Model: k.Embedding.Model, BatchSize: k.Embedding.BatchSize})
		if err != nil {
			return fmt.Errorf("knowledge.embedding: %w", err)
		}
		s.Knowledge.Embedder = emb
	}
	s.Toolbox.Knowledge = s.Knowledge
	s.singleton(s.bg, DutyKnowledgeSweeper, func(ctx context.Context) { s.Knowledge.RunSweeper(ctx, KnowledgeSweepInterval) })
	return nil
}
