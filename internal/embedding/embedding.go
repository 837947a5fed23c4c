// Package embedding turns texts into vectors through the governed provider
// path: every call is admitted, reserved, settled and written to the ledger
// by the cost controller with source "embedding" (spec, cost rule 1), like a
// chat call.
//
// This file is the contract between the embedding clients (this package) and
// their consumers (knowledge ingestion and retrieval, memory); the
// implementation lives beside it.
package embedding

import (
	"context"

	"github.com/agentryhq/agentry/internal/llm"
)

// Embedder embeds texts with one configured provider and model.
type Embedder interface {
	// Embed embeds texts in one provider call and returns one vector per
	// text, in order. meta attributes the call (Source is set to
	// llm.SourceEmbedding when empty); a caller that may repeat the call (a
	// retried Temporal activity) sets a stable meta.CallID so the ledger
	// counts it once. A hard budget that cannot cover the call returns an
	// error matching costs.ErrBudgetExceeded (errors.Is), which durable
	// callers turn into a budget wait rather than a failure.
	Embed(ctx context.Context, texts []string, meta llm.CallMeta) ([][]float32, error)
	// Model is the provider's model id (stored beside vectors, so a change
	// of model is seen as a need to re-embed).
	Model() string
}
