package gateway

import (
	"context"
	"fmt"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/vector"
	vectorpg "github.com/agentryhq/agentry/internal/vector/postgres"
	vectorsqlite "github.com/agentryhq/agentry/internal/vector/sqlite"
)

// addVectors opens the vector store vector.backend selects (its default:
// the gateway database's own, config.VectorBackend) on the application
// database, for the knowledge bases.
func (s *Services) addVectors(ctx context.Context) error {
	st, err := NewVectorStore(ctx, s.gw)
	if err != nil {
		return err
	}
	s.Vectors = st
	return nil
}

// NewVectorStore opens the vector store of g's configuration.
func NewVectorStore(ctx context.Context, g *Gateway) (vector.Store, error) {
	switch backend := g.Config.VectorBackend(); backend {
	case config.VectorEmbedded:
		return vectorsqlite.New(ctx, g.Store)
	case config.VectorPostgres:
		st, err := vectorpg.New(ctx, g.Store, vectorpg.Options{})
		if err != nil {
			return nil, err
		}
		if !st.PGVector() {
			g.log.Info("vector store on PostgreSQL without pgvector: similarity is computed by the gateway (docs/configuration.md, vector)")
		}
		return st, nil
	default:
		return nil, fmt.Errorf("vector.backend: unknown backend %q (use embedded or postgres)", backend)
	}
}
