package temporalserver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/server/common/config"

	"github.com/agentryhq/agentry/internal/sqlitemem"
)

// sqliteHistoryShards is fixed when the database is created. One shard suits
// a single node on SQLite, whose writes are serialized anyway.
const sqliteHistoryShards = 1

// storage is the server's persistence, ready for it to open: schema current,
// namespace present.
type storage struct {
	main       *config.SQL
	visibility *config.SQL // nil: main holds visibility too (SQLite)
	shards     int32
	created    bool   // a new database
	describe   string // for the log: file path or host/database
	unlock     func() // releases what the server owns exclusively
}

// prepareStorage sets up the SQLite file in o.DataDir or, with o.Postgres,
// the two PostgreSQL databases, and creates the namespace in them.
func prepareStorage(ctx context.Context, o Options, logger *slog.Logger) (storage, error) {
	if o.Postgres != nil {
		stores, created, err := setupPostgres(ctx, o.Postgres, newTemporalLogger(logger))
		if err != nil {
			return storage{}, err
		}
		if err := createNamespace(stores.main, clusterName, o.Namespace, o.Retention, o.SearchAttributes); err != nil {
			return storage{}, err
		}
		return storage{
			main: stores.main, visibility: stores.visibility, shards: int32(o.Postgres.HistoryShards), created: created,
			describe: fmt.Sprintf("postgres %s/%s + %s", stores.main.ConnectAddr, stores.main.DatabaseName, stores.visibility.DatabaseName),
			unlock:   func() {},
		}, nil
	}

	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return storage{}, fmt.Errorf("temporal data directory %q: %w", o.DataDir, err)
	}
	// The path ends up in a SQLite URI, where these start the query/fragment.
	if strings.ContainsAny(dataDir, "?#") {
		return storage{}, fmt.Errorf("temporal data directory %q: must not contain '?' or '#'", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return storage{}, fmt.Errorf("create temporal data directory: %w", err)
	}
	if err := sqlitemem.Configure(); err != nil {
		o.Logger.Warn("SQLite runs without its memory settings (slower)", "err", err)
	}
	dbPath := filepath.Join(dataDir, databaseFile)
	unlock, err := lockDataDir(dbPath)
	if err != nil {
		return storage{}, err
	}
	fail := func(err error) (storage, error) { unlock(); return storage{}, err }
	created, err := ensureSchema(dbPath)
	if err != nil {
		return fail(err)
	}
	if err := trimVisibilityIndexes(dbPath, o.SearchAttributes); err != nil {
		return fail(err)
	}
	sqlCfg := sqliteConfig(dbPath)
	if err := createNamespace(sqlCfg, clusterName, o.Namespace, o.Retention, o.SearchAttributes); err != nil {
		return fail(err)
	}
	return storage{main: sqlCfg, shards: sqliteHistoryShards, created: created, describe: dbPath, unlock: unlock}, nil
}
