//go:build noembeddedtemporal

package agentryd

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentryhq/agentry/gateway"
	"github.com/agentryhq/agentry/internal/config"
)

// This build leaves the embedded Temporal server out (about half the binary);
// it needs temporal.address to name an external cluster.
const embeddedAvailable = false

func startEmbeddedTemporal(ctx context.Context, cfg *config.Loaded, log *slog.Logger) (gateway.EmbeddedTemporal, error) {
	return startEmbeddedTemporalWith(ctx, cfg, log, nil)
}

func startEmbeddedTemporalWith(context.Context, *config.Loaded, *slog.Logger, *postgresFlags) (gateway.EmbeddedTemporal, error) {
	return nil, errors.New("this build has no embedded Temporal server (built with -tags noembeddedtemporal); set temporal.address (AGENTRY_TEMPORAL_ADDRESS) to an external cluster")
}
