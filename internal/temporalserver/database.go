package temporalserver

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"google.golang.org/protobuf/types/known/durationpb"
	_ "modernc.org/sqlite" // driver "sqlite", the one Temporal's SQLite plugin uses
)

// databaseFile is the SQLite file of the embedded server inside Options.DataDir.
const databaseFile = "temporal.db"

// sqliteConfig is the persistence config of the server's database file.
func sqliteConfig(path string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		ConnectAttributes: map[string]string{
			"mode": "rwc",
			// WAL: readers (visibility queries, the Web UI) don't wait for the
			// writer; synchronous=normal is durable across process crashes in WAL
			// mode and much faster than full.
			"journal_mode": "wal",
			"synchronous":  "normal",
			// Temporal opens one connection, but the schema setup, namespace
			// bootstrap and a second process (`sqlite3`) may touch the file.
			"busy_timeout": "10000",
			// Statement journals in memory in 1 KiB chunks (the default spills
			// them in 64 KiB buffers, which the pure-Go allocator maps and
			// unmaps for every statement; see internal/sqlitemem).
			"temp_store": "memory",
		},
	}
}

// ensureSchema creates the database file with Temporal's schema when it does
// not exist yet. An existing file is left alone, so history survives restarts.
//
// The schema goes into a temporary file that is renamed into place only when
// complete, so a crash halfway never leaves a file that looks set up but isn't.
// It is written through a plain database/sql handle, not Temporal's plugin:
// the plugin caches connections by DSN for the life of the process and never
// closes them, which would keep the temporary file open across the rename.
func ensureSchema(path string) (created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("check temporal database %s: %w", path, err)
	}

	tmp := path + ".init"
	removeDB := func(p string) {
		for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
			_ = os.Remove(p + suffix)
		}
	}
	removeDB(tmp) // left over from an interrupted first start

	if err := setupSchemaFile(tmp); err != nil {
		removeDB(tmp)
		return false, fmt.Errorf("set up temporal schema in %s: %w", filepath.Dir(path), err)
	}
	if err := os.Rename(tmp, path); err != nil {
		removeDB(tmp)
		return false, fmt.Errorf("move temporal database into place: %w", err)
	}
	return true, nil
}

func setupSchemaFile(path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rwc")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	if err := sqliteschema.SetupSchemaOnDB(execOnlyDB{db: db}); err != nil {
		_ = db.Close()
		return err
	}
	return db.Close()
}

// execOnlyDB lets sqliteschema.SetupSchemaOnDB run on a plain *sql.DB: it only
// ever calls Exec. The embedded interface is nil, so any other method panics,
// which a server upgrade that starts using one would show at once in tests.
type execOnlyDB struct {
	sqlplugin.AdminDB
	db *sql.DB
}

func (e execOnlyDB) Exec(stmt string, args ...any) error {
	_, err := e.db.Exec(stmt, args...)
	return err
}

// createNamespace inserts the namespace into the database unless it exists,
// before the server starts, so it is usable the moment the frontend answers.
// Search attributes and retention of an existing namespace are reconciled
// through the API after start (see configureNamespace).
func createNamespace(cfg *config.SQL, clusterName, name string, retention time.Duration, attrs map[string]enums.IndexedValueType) error {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, name, false, attrs)
	if err != nil {
		return fmt.Errorf("namespace %q: %w", name, err)
	}
	ns.Detail.Config.Retention = durationpb.New(retention)
	if err := sqliteschema.CreateNamespaces(cfg, ns); err != nil {
		return fmt.Errorf("create namespace %q: %w", name, err)
	}
	return nil
}
