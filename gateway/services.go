package gateway

import (
	"context"
	"log/slog"

	"github.com/agentryhq/agentry/api"
	"github.com/agentryhq/agentry/worker"
)

// Services are the feature services built on top of the foundation. Each
// feature adds its service here and its routes through Features.
type Services struct {
	gw     *Gateway
	log    *slog.Logger
	worker *worker.Worker
}

// NewServices builds the feature services.
func NewServices(ctx context.Context, g *Gateway, log *slog.Logger) (*Services, error) {
	s := &Services{gw: g, log: log}
	s.worker = worker.New(g.Temporal, g.Config.Temporal.TaskQueue, log)
	return s, nil
}

// Features are the API route groups.
func (s *Services) Features() []api.Feature { return nil }

// StartWorker starts the in-process Temporal worker.
func (s *Services) StartWorker() error { return s.worker.Start() }

// Stop stops background work.
func (s *Services) Stop() {
	if s.worker != nil {
		s.worker.Stop()
	}
}
