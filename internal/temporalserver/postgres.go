package temporalserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/server/common/config"
	tlog "go.temporal.io/server/common/log"
	pgplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	pgschema "go.temporal.io/server/schema/postgresql/v12"
	"go.temporal.io/server/tools/common/schema"
	tsql "go.temporal.io/server/tools/sql"
)

// Config keys (flags of `agentryd dev temporal`) of the PostgreSQL-backed
// server, named in its errors.
const (
	PostgresKey           = "--postgres"
	PostgresVisibilityKey = "--postgres-visibility"
	UpgradeSchemaKey      = "--upgrade-schema"
	HistoryShardsKey      = "--history-shards"
)

// Schema names of Temporal's embedded schema files (go.temporal.io/server/schema)
// and the versions this server release needs.
const (
	pgMainSchema       = "postgresql/v12/temporal"
	pgVisibilitySchema = "postgresql/v12/visibility"
	// defaultPostgresShards: history shards of a new PostgreSQL cluster. Fixed
	// at creation (the server refuses another count later); 4 lets the four
	// shard owners write in parallel on a small cluster. Production clusters
	// pick it for their peak (docs/operations.md, capacity model).
	defaultPostgresShards = 4
)

// Postgres puts the server's persistence and visibility on PostgreSQL
// (Temporal's postgres12 SQL plugin, pgx driver) instead of the SQLite file.
type Postgres struct {
	// DSN of the persistence database, URL (postgres://u:p@host:5432/temporal?sslmode=disable)
	// or key=value form. The database is created if the user may.
	DSN string
	// VisibilityDSN is the visibility database. Default: DSN with the
	// database name suffixed "_visibility".
	VisibilityDSN string
	// UpgradeSchema applies Temporal's versioned schema updates to a database
	// set up by an older server. Without it an older schema is an error.
	UpgradeSchema bool
	// HistoryShards of a new cluster. Default 4. Must match an existing one.
	HistoryShards int
}

// postgresStores are the parsed persistence configs.
type postgresStores struct {
	main, visibility *config.SQL
}

// parsePostgresDSN turns a libpq DSN into Temporal's SQL config.
func parsePostgresDSN(dsn, key string) (*config.SQL, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, fmt.Errorf("%s: empty PostgreSQL DSN", key)
	}
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		// pgconn's message may quote the DSN with its password: don't repeat it.
		return nil, fmt.Errorf("%s: not a PostgreSQL DSN (postgres://user:password@host:5432/temporal?sslmode=disable or host=... dbname=...)", key)
	}
	if pc.Database == "" {
		return nil, fmt.Errorf("%s: the DSN names no database", key)
	}
	sslmode := "disable"
	if pc.TLSConfig != nil {
		sslmode = "verify-full"
		if pc.TLSConfig.InsecureSkipVerify {
			sslmode = "require"
		}
	}
	return &config.SQL{
		PluginName:        pgplugin.PluginNamePGX,
		User:              pc.User,
		Password:          pc.Password,
		DatabaseName:      pc.Database,
		ConnectAddr:       net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))),
		ConnectProtocol:   "tcp",
		ConnectAttributes: map[string]string{"sslmode": sslmode},
		MaxConns:          20,
		MaxIdleConns:      20,
		MaxConnLifetime:   time.Hour,
	}, nil
}

func (p *Postgres) stores() (postgresStores, error) {
	main, err := parsePostgresDSN(p.DSN, PostgresKey)
	if err != nil {
		return postgresStores{}, err
	}
	var vis *config.SQL
	if p.VisibilityDSN != "" {
		if vis, err = parsePostgresDSN(p.VisibilityDSN, PostgresVisibilityKey); err != nil {
			return postgresStores{}, err
		}
	} else {
		c := *main
		c.ConnectAttributes = map[string]string{"sslmode": main.ConnectAttributes["sslmode"]}
		c.DatabaseName = main.DatabaseName + "_visibility"
		vis = &c
	}
	if vis.DatabaseName == main.DatabaseName && vis.ConnectAddr == main.ConnectAddr {
		return postgresStores{}, fmt.Errorf("%s and %s name the same database %q; Temporal keeps persistence and visibility in two", PostgresKey, PostgresVisibilityKey, main.DatabaseName)
	}
	return postgresStores{main: main, visibility: vis}, nil
}

// pgxDSN is the DSN pgx dials for cfg's database (or dbname instead).
func pgxDSN(cfg *config.SQL, dbname string) string {
	host, port, _ := net.SplitHostPort(cfg.ConnectAddr)
	q := func(s string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'" }
	return fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=%s connect_timeout=10",
		q(host), q(port), q(cfg.User), q(cfg.Password), q(dbname), q(cfg.ConnectAttributes["sslmode"]))
}

// ensurePostgresDatabase checks that cfg's database answers, creating it
// (through the maintenance database "postgres") when it does not exist.
func ensurePostgresDatabase(ctx context.Context, cfg *config.SQL, key string) error {
	conn, err := pgx.Connect(ctx, pgxDSN(cfg, cfg.DatabaseName))
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name: no such database
		return fmt.Errorf("%s: connect to PostgreSQL at %s (database %q): %s", key, cfg.ConnectAddr, cfg.DatabaseName, pgErrText(err))
	}
	admin, err := pgx.Connect(ctx, pgxDSN(cfg, "postgres"))
	if err != nil {
		return fmt.Errorf("%s: database %q does not exist and the maintenance database to create it does not answer: %s", key, cfg.DatabaseName, pgErrText(err))
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.DatabaseName}.Sanitize()); err != nil {
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: another process won
			return nil
		}
		return fmt.Errorf("%s: create database %q: %s", key, cfg.DatabaseName, pgErrText(err))
	}
	return nil
}

// pgErrText is err's message without anything pgx might echo of the DSN.
func pgErrText(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if inner := errors.Unwrap(ce); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// SchemaVersionError reports a database whose Temporal schema is not the
// one this server needs.
type SchemaVersionError struct {
	Key, Database, Have, Want string
}

func (e *SchemaVersionError) Error() string {
	if semver.MustParse(normalizeVersion(e.Have)).GT(semver.MustParse(normalizeVersion(e.Want))) {
		return fmt.Sprintf("%s: Temporal schema of database %q is version %s, newer than the %s this server (go.temporal.io/server v1.32.1) knows; run the newer server it was upgraded for",
			e.Key, e.Database, e.Have, e.Want)
	}
	return fmt.Sprintf("%s: Temporal schema of database %q is version %s, this server needs %s; back the database up, then start once with %s to apply Temporal's schema updates (or run temporal-sql-tool update-schema)",
		e.Key, e.Database, e.Have, e.Want, UpgradeSchemaKey)
}

func normalizeVersion(v string) string {
	if strings.Count(v, ".") == 1 {
		return v + ".0"
	}
	return v
}

// ensurePostgresSchema sets up Temporal's schema on a new database, applies
// the versioned updates to an older one when upgrade is set, and otherwise
// refuses a schema of another version. It runs Temporal's own schema tool
// code (tools/sql + tools/common/schema) on the schema files the server
// module embeds, like `temporal-sql-tool setup-schema -v 0.0` followed by
// `update-schema --schema-name ...`.
func ensurePostgresSchema(cfg *config.SQL, key, schemaName, want string, upgrade bool, logger tlog.Logger) (created bool, err error) {
	conn, err := tsql.NewConnection(cfg, logger)
	if err != nil {
		return false, fmt.Errorf("%s: open database %q: %s", key, cfg.DatabaseName, pgErrText(err))
	}
	defer conn.Close()

	have, verErr := conn.ReadSchemaVersion()
	if verErr != nil || have == "" {
		tables, err := conn.ListTables()
		if err != nil {
			return false, fmt.Errorf("%s: list tables of database %q: %s", key, cfg.DatabaseName, pgErrText(err))
		}
		if len(tables) > 0 {
			return false, fmt.Errorf("%s: database %q has tables but no Temporal schema version; give Temporal a database of its own", key, cfg.DatabaseName)
		}
		setup := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger)
		if err := setup.Run(); err != nil {
			return false, fmt.Errorf("%s: set up Temporal schema version tables in %q: %w", key, cfg.DatabaseName, err)
		}
		have, created, upgrade = "0.0", true, true
	}
	if have == want {
		return created, nil
	}
	if !upgrade || semver.MustParse(normalizeVersion(have)).GT(semver.MustParse(normalizeVersion(want))) {
		return false, &SchemaVersionError{Key: key, Database: cfg.DatabaseName, Have: have, Want: want}
	}
	update := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: cfg.DatabaseName, SchemaName: schemaName, TargetVersion: want}, logger)
	if err := update.Run(); err != nil {
		return false, fmt.Errorf("%s: update Temporal schema of %q from %s to %s: %w", key, cfg.DatabaseName, have, want, err)
	}
	return created, nil
}

// setupPostgres readies both databases: reachable, created, schema current.
func setupPostgres(ctx context.Context, p *Postgres, logger tlog.Logger) (postgresStores, bool, error) {
	st, err := p.stores()
	if err != nil {
		return st, false, err
	}
	if err := ensurePostgresDatabase(ctx, st.main, PostgresKey); err != nil {
		return st, false, err
	}
	visKey := PostgresVisibilityKey
	if p.VisibilityDSN == "" {
		visKey = PostgresKey + " (its _visibility database)"
	}
	if err := ensurePostgresDatabase(ctx, st.visibility, visKey); err != nil {
		return st, false, err
	}
	created, err := ensurePostgresSchema(st.main, PostgresKey, pgMainSchema, pgschema.Version, p.UpgradeSchema, logger)
	if err != nil {
		return st, false, err
	}
	if _, err := ensurePostgresSchema(st.visibility, visKey, pgVisibilitySchema, pgschema.VisibilityVersion, p.UpgradeSchema, logger); err != nil {
		return st, false, err
	}
	return st, created, nil
}
