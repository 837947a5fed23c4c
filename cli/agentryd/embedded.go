//go:build !noembeddedtemporal

package agentryd

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/agentryhq/agentry/gateway"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/temporalserver"
)

// embeddedAvailable tells `agentryd dev temporal` it can run.
const embeddedAvailable = true

// startEmbeddedTemporal starts the in-process Temporal server with the
// defaults of temporal.yaml and the temporal.embedded config keys. Its
// SQLite file lives in the workspace data folder, apart from the
// application database.
func startEmbeddedTemporal(ctx context.Context, cfg *config.Loaded, log *slog.Logger) (gateway.EmbeddedTemporal, error) {
	return startEmbeddedTemporalWith(ctx, cfg, log, nil)
}

// startEmbeddedTemporalWith is startEmbeddedTemporal on PostgreSQL when pg is set.
func startEmbeddedTemporalWith(ctx context.Context, cfg *config.Loaded, log *slog.Logger, pg *postgresFlags) (gateway.EmbeddedTemporal, error) {
	opts, err := temporalserver.LoadDefaults()
	if err != nil {
		return nil, err
	}
	e := cfg.Temporal.Embedded
	opts.DataDir = filepath.Join(cfg.Workspace.DataDir(), "temporal")
	opts.Host = e.Host
	opts.FrontendPort = e.FrontendPort
	opts.UIPort = e.UIPort
	opts.UIEnabled = e.UIEnabled
	opts.Namespace = cfg.Temporal.Namespace
	opts.Logger = log
	if pg != nil {
		opts.Postgres = &temporalserver.Postgres{DSN: pg.dsn, VisibilityDSN: pg.visibilityDSN, UpgradeSchema: pg.upgrade, HistoryShards: pg.shards}
	}
	return temporalserver.Start(ctx, opts)
}
