// Package models holds Agentry's GORM models and the store that opens the
// application database: an embedded SQLite file by default, PostgreSQL when
// several gateway processes share state.
//
// Open migrates the tables listed in migrate.go (schemaModels, then
// dataMigrations): one explicit ordered list, no init registries.
//
// # Layout
//
// One file set per domain, named for it, each with its tables, its
// methods on Store and one interface in stores.go that the domain's
// consumers take instead of the whole Store:
//
//	workboard*.go                  WorkboardStore, TaskRunStore
//	chat*.go, session*.go,         ChatStore
//	historycache.go
//	ledger*.go                     LedgerStore (-> *CostLedger)
//	deliveries*.go                 DeliveryStore
//	scheduleruns.go                ScheduleStore
//	webhookidempotency.go,         WebhookStore
//	webhookruns.go
//	events.go                      EventStore
//	runlog.go                      RunLogStore
//	approvals.go                   ApprovalStore
//	secrets.go, secretkeys.go      SecretStore
//	reconcile.go                   ReconcileStore
//	packageinstall.go              PackageInstallStore
//	mcp.go                         MCPStore
//
// The store itself: db.go (Open, pools), migrate.go, storage.go (full
// disk), scrubhook.go, sequences.go, commitlater.go (writes a request
// holds for its exchange, both databases), writer.go. SQLite's write engine
// (the group commit writer, its lingering transaction, redo log and driver
// wrapper) and its durability contract are package sqlitewriter, which
// knows no table; the cost ledger plugs its budget counters and admission
// journal into the writer's batches through sqlitewriter.Hook
// (ledger_batchhook.go, ledger_counterbook.go, admissionjournal*.go).
package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentryhq/agentry/internal/sqlitemem"
	"github.com/agentryhq/agentry/models/sqlitewriter"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	// The pure-Go SQLite driver, registered as "sqlite". Temporal links it
	// too; it builds with CGO_ENABLED=0.
	_ "modernc.org/sqlite"
)

// Driver names accepted in Options.Driver (the storage.driver setting).
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

const (
	// sqliteBusyTimeout is how long a connection waits for SQLite's single
	// write lock before failing with SQLITE_BUSY.
	sqliteBusyTimeout = 10 * time.Second
	// defaultSQLiteConns: see openSQLite for why the pool stays small.
	defaultSQLiteConns = 4
	// defaultPostgresConns leaves room for several gateway processes on a
	// server with PostgreSQL's default max_connections of 100.
	defaultPostgresConns = 10
	// defaultWALPages is the WAL size, in pages, past which a commit
	// checkpoints (SQLite's default is 1000; see checkpointer for why it
	// is larger here).
	defaultWALPages = 8192
	// walSizeLimit is the size SQLite truncates the WAL file to when it
	// starts writing it from the beginning again.
	walSizeLimit = 64 << 20
	// slowQuery is the duration from which a statement is logged (at debug).
	slowQuery = 200 * time.Millisecond
)

// Options configure Open.
type Options struct {
	// Driver is "sqlite" (the default when empty) or "postgres".
	Driver string
	// DSN is the database file path for SQLite (its directory is created)
	// and a connection string (keyword/value or URL) for PostgreSQL.
	DSN string
	// MaxOpenConns caps the connection pool; 0 picks a default per driver.
	MaxOpenConns int
	// Logger receives slow queries (debug) and GORM's own warnings; nil
	// discards them.
	Logger *slog.Logger
	// Scrub, when set, is applied to the error and payload columns on every
	// insert and update (the gateway passes scrub.Auto), so secrets quoted by
	// outside text never reach the database files.
	Scrub func(string) string
	// WriteQueue bounds the writes waiting for SQLite's group-commit writer
	// (0: DefaultGroupQueue); past it requests are refused with
	// ErrOverloaded (503).
	WriteQueue int
	// CommitLinger is how long SQLite's writer may keep its transaction
	// open for more batches (see sqlitewriter.RedoLog): 0 takes DefaultLinger, a
	// negative value commits every batch.
	CommitLinger time.Duration
	// SyncToDisk makes every acknowledgement survive a power cut: SQLite
	// runs synchronous=FULL and the redo log and admission journal are
	// fsynced before a batch is acknowledged, one fsync per batch
	// (storage.sqlite.durability: power). Off, acknowledged writes survive
	// a crash of the process, not of the machine.
	SyncToDisk bool
	// walPagesForTest replaces defaultWALPages (tests).
	walPagesForTest int
	// noJournalForTest admits through SQLite commits, as a process
	// without the admission journal's lock does (tests, benchmarks).
	noJournalForTest bool
}

func (o Options) walPages() int {
	if o.walPagesForTest > 0 {
		return o.walPagesForTest
	}
	return defaultWALPages
}

// Store is the application database.
type Store struct {
	DB     *gorm.DB
	Driver string // DriverSQLite or DriverPostgres
	// Group is SQLite's single writer of the chat path (group commit; see
	// sqlitewriter.GroupCommit); nil on PostgreSQL.
	Group *sqlitewriter.GroupCommit
	// hook is what the cost ledger plugs into Group's batches (its budget
	// counters and admission journal; see ledgerHook); nil on PostgreSQL.
	hook *ledgerHook
	// sessionKeys is the last session key given on SQLite (see
	// newSessionKey).
	sessionKeys atomic.Int64
	// scrub is Options.Scrub, for the writes that bypass GORM's hooks.
	scrub func(string) string
	// checkpoints copies SQLite's WAL into the database file (SQLite only;
	// see checkpointer).
	checkpoints *sqlitewriter.Checkpointer
	// history caches sessions' recent messages (SQLite only; see
	// historyCache).
	history *historyCache
	// recentStmt and spilledStmt read a session's messages on SQLite
	// (recentMessagesSQL, spilledMessagesSQL).
	recentStmt, spilledStmt sqlitewriter.PreparedStmt
	// window finds the newest sessions' keys by id (SQLite only; see
	// sessionWindow).
	window *sessionWindow
	// storageFullAt is when a write was last refused for lack of space
	// (unix nanoseconds, 0: never; see NoteStorageFull).
	storageFullAt atomic.Int64
	// log is Options.Logger (never nil).
	log *slog.Logger
}

// Open opens the database, checks that it answers and brings its schema up
// to date (see migrate). Several processes may Open one database at once.
func Open(ctx context.Context, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	driver, err := normalizeDriver(opts.Driver)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(opts.DSN) == "" {
		if driver == DriverSQLite {
			return nil, errors.New("open database: storage DSN is empty; SQLite needs a file path")
		}
		return nil, errors.New("open database: storage DSN is empty; PostgreSQL needs a connection string")
	}

	cfg := &gorm.Config{
		Logger:               &slogLogger{log: log},
		DisableAutomaticPing: true, // we ping with the caller's context below
		NowFunc:              func() time.Time { return time.Now().UTC() },
	}
	var db *gorm.DB
	var conns *sqlitewriter.Connector
	switch driver {
	case DriverSQLite:
		if err := sqlitemem.Configure(); err != nil {
			log.Warn("SQLite runs without its memory settings (slower)", "err", err)
		}
		db, conns, err = openSQLiteRetrying(ctx, opts, cfg)
	case DriverPostgres:
		db, err = openPostgres(opts, cfg)
	}
	if err != nil {
		return nil, err
	}
	s := &Store{DB: db, Driver: driver, scrub: opts.Scrub, log: log}
	if err := registerScrub(db, opts.Scrub); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := registerFullNote(db, s); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	// The journals belong to the one process holding their lock. The redo
	// log runs what a crash cut off before migrations touch the schema its
	// statements were written for.
	var journal *admissionJournal
	var left []*deferredAdmission
	var redo *sqlitewriter.RedoLog
	if driver == DriverSQLite && !opts.noJournalForTest {
		if journal, left, err = openAdmissionJournal(opts.DSN); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("open database: %w", err)
		}
		if journal != nil {
			sqlDB, _ := db.DB() // SQLite's pool is a *sql.DB (openSQLite)
			if redo, err = sqlitewriter.OpenRedoLog(ctx, sqlDB, opts.DSN, log); err != nil {
				closeJournals(journal, nil)
				_ = s.Close()
				return nil, fmt.Errorf("open database: %w", err)
			}
			redo.SyncEach, journal.syncEach = opts.SyncToDisk, opts.SyncToDisk
		}
	}
	if err := migrate(ctx, s, schemaModels, dataMigrations); err != nil {
		closeJournals(journal, redo)
		_ = s.Close()
		return nil, err
	}
	if driver == DriverSQLite {
		sqlDB, err := db.DB()
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		// Primed below, once the journal's batches are in.
		s.history = newHistoryCache(historyKeep, historySessions, historyBytes)
		s.window = newSessionWindow()
		s.hook = newLedgerHook(journal)
		if s.Group, err = sqlitewriter.Start(sqlDB, sqlitewriter.Config{
			Queue: opts.WriteQueue, Redo: redo, Linger: opts.CommitLinger, Hook: s.hook,
			OnFull: s.NoteStorageFull, IsFull: IsStorageFull,
			OnCommit: func() {
				s.history.committed()
				s.dropSpilled()
			},
		}); err != nil {
			closeJournals(journal, redo)
			_ = s.Close()
			return nil, err
		}
		s.hook.start(s.Group)
		conns.SetWriter(s.Group)
		if journal != nil {
			if err := s.hook.recoverJournal(ctx, left); err != nil {
				_ = s.Close()
				return nil, fmt.Errorf("open database: %w", err)
			}
		}
		dsn, _ := sqliteDSN(opts.DSN, opts.walPages(), opts.SyncToDisk) // valid: openSQLite took it
		if s.checkpoints, err = sqlitewriter.StartCheckpointer(dsn, log); err != nil {
			_ = s.Close()
			return nil, err
		}
		if err := s.primeSessions(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
		if err := s.spillPrimed(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

func normalizeDriver(name string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "sqlite", "sqlite3":
		return DriverSQLite, nil
	case "postgres", "postgresql", "pg":
		return DriverPostgres, nil
	}
	return "", fmt.Errorf("open database: unknown storage driver %q (use %q or %q)", name, DriverSQLite, DriverPostgres)
}

// closeJournals closes the journals of a store that failed to open before
// its writer took them (either may be nil).
func closeJournals(j *admissionJournal, r *sqlitewriter.RedoLog) {
	if j != nil {
		j.close()
	}
	if r != nil {
		r.Close()
	}
}

// openSQLiteRetrying is openSQLite retried while the file is locked. The
// first connection switches a new file to WAL, which takes an exclusive lock
// that SQLite does not wait for with the busy handler: a process opening the
// file at that moment gets SQLITE_BUSY at once, whatever busy_timeout says
// (seen with several gateways starting on one fresh database). The wait is
// bounded by the busy timeout and the caller's context.
func openSQLiteRetrying(ctx context.Context, opts Options, cfg *gorm.Config) (*gorm.DB, *sqlitewriter.Connector, error) {
	deadline := time.Now().Add(sqliteBusyTimeout)
	for attempt := 1; ; attempt++ {
		db, conns, err := openSQLite(opts, cfg)
		if err == nil {
			if err = pingSQLite(ctx, db); err == nil {
				return db, conns, nil
			}
			closeGorm(db)
		}
		if !transient(err) || time.Now().After(deadline) {
			return nil, nil, err
		}
		// Spread the retries of processes that collided.
		pause := time.Duration(attempt*5+rand.IntN(20)) * time.Millisecond
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(pause):
		}
	}
}

// pingSQLite opens the pool's first connection, which applies the pragmas.
func pingSQLite(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("open database: SQLite: %w", err)
	}
	return nil
}

func closeGorm(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// openSQLite opens the database file with settings for a long-running
// server:
//
//   - journal_mode=WAL lets readers proceed while one writer writes;
//   - busy_timeout makes a connection wait for the write lock instead of
//     failing at once;
//   - _txlock=immediate makes every transaction take the write lock at
//     BEGIN. A deferred transaction that reads and then writes cannot wait
//     for the lock (SQLite would risk a deadlock) and fails with
//     SQLITE_BUSY no matter the busy_timeout;
//   - foreign_keys=on enforces the constraints the models declare;
//   - synchronous=NORMAL is durable across process crashes in WAL mode and
//     only risks the last transactions on power loss, at a fraction of the
//     fsyncs of FULL: a commit is a write to the WAL file, which the
//     operating system keeps when the process is killed; the WAL is synced
//     to disk at checkpoints. A committed ledger row therefore survives a
//     SIGKILL of the gateway; a power cut or kernel crash may lose the last
//     commits before the next checkpoint;
//   - temp_store=MEMORY keeps statement journals in memory (see below).
//
// SQLite (modernc here) in WAL mode allows many readers but one writer at a
// time. Every connection waiting for the write lock polls it, so a large
// pool turns a burst of writes into a storm of retries and SQLITE_BUSY once
// busy_timeout runs out. The pool therefore stays small: a few connections
// let reads overlap a write while writers queue in database/sql, which is
// fair and cheap, rather than inside SQLite.
func openSQLite(opts Options, cfg *gorm.Config) (*gorm.DB, *sqlitewriter.Connector, error) {
	path := opts.DSN
	dsn, err := sqliteDSN(path, opts.walPages(), opts.SyncToDisk)
	if err != nil {
		return nil, nil, err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, nil, fmt.Errorf("open database: create directory for %s: %w", path, err)
		}
	}
	// The pool's connections go through sqlitewriter.Connector (see
	// sqlitewriter.RedoLog).
	conns := sqlitewriter.NewConnector(dsn)
	db, err := gorm.Open(sqlite.New(sqlite.Config{Conn: sql.OpenDB(conns)}), cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("open database: SQLite %s: %w", path, err)
	}
	n := opts.MaxOpenConns
	if n <= 0 {
		n = defaultSQLiteConns
	}
	// One more for the group commit's writer, which keeps one for itself
	// (see sqlitewriter.Start).
	if err := limitPool(db, n+1, 0); err != nil {
		return nil, nil, err
	}
	return db, conns, nil
}

// sqliteDSN is the driver's DSN for the database file at path, with the
// pragmas every connection applies (see openSQLite).
func sqliteDSN(path string, walPages int, syncFull bool) (string, error) {
	if strings.HasPrefix(path, "file:") || strings.Contains(path, "?") || path == ":memory:" {
		return "", fmt.Errorf("open database: SQLite DSN %q must be a plain file path", path)
	}
	q := url.Values{}
	// busy_timeout is applied first by the driver, so the other pragmas
	// already wait for a lock held by another process.
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	if syncFull {
		// storage.sqlite.durability: power: every commit fsyncs the WAL.
		q.Add("_pragma", "synchronous(FULL)")
	} else {
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	// Statement journals (the undo log of one statement inside a larger
	// transaction, as in the group commit's batches) in memory, in small
	// chunks: the default spills them in 64 KiB buffers, which the pure-Go
	// allocator maps and unmaps for every statement.
	q.Add("_pragma", "temp_store(MEMORY)")
	// A committing connection checkpoints only past walPages pages: the
	// checkpointer copies the WAL from its own connection meanwhile (see
	// checkpointer), so that commit finds little left to copy.
	// journal_size_limit truncates the WAL file when SQLite starts it
	// again after a complete checkpoint, so a burst does not leave a large
	// file behind.
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walPages))
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
	q.Set("_txlock", "immediate")
	return path + "?" + q.Encode(), nil
}

func openPostgres(opts Options, cfg *gorm.Config) (*gorm.DB, error) {
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: opts.DSN}), cfg)
	if err != nil {
		// pgx redacts passwords from its parse errors.
		return nil, fmt.Errorf("open database: PostgreSQL: %w", err)
	}
	conns := opts.MaxOpenConns
	if conns <= 0 {
		conns = defaultPostgresConns
	}
	// Idle connections are closed after a while so a quiet gateway does not
	// hold slots other processes sharing the server could use.
	if err := limitPool(db, conns, 5*time.Minute); err != nil {
		return nil, err
	}
	return db, nil
}

func limitPool(db *gorm.DB, conns int, idleTime time.Duration) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	if idleTime > 0 {
		sqlDB.SetConnMaxIdleTime(idleTime)
	}
	return nil
}

// DriverName is Driver (DriverSQLite or DriverPostgres), for consumers that
// take a store interface.
func (s *Store) DriverName() string { return s.Driver }

// SQLDB is the connection pool under the GORM handle.
func (s *Store) SQLDB() (*sql.DB, error) { return s.DB.DB() }

// Ping checks that the database answers, for start-up and /health.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.DB.DB()
	if err != nil {
		return fmt.Errorf("ping %s database: %w", s.Driver, err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s database: %w", s.Driver, err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() error {
	if s.Group != nil {
		s.Group.Close()
	}
	if s.checkpoints != nil {
		s.checkpoints.Close()
	}
	sqlDB, err := s.DB.DB()
	if err != nil {
		return fmt.Errorf("close %s database: %w", s.Driver, err)
	}
	if err := sqlDB.Close(); err != nil {
		return fmt.Errorf("close %s database: %w", s.Driver, err)
	}
	return nil
}

// slogLogger replaces GORM's default logger, which prints every slow query
// and error to stdout: slow statements go to slog at debug level, GORM's
// own messages at their level. Failed statements are not logged here; they
// are returned to, and reported by, the caller.
type slogLogger struct {
	log *slog.Logger
}

var _ gorm.ParamsFilter = (*slogLogger)(nil)

func (l *slogLogger) LogMode(logger.LogLevel) logger.Interface { return l }

func (l *slogLogger) Info(ctx context.Context, msg string, args ...any) {
	l.log.DebugContext(ctx, "gorm: "+fmt.Sprintf(msg, args...))
}

func (l *slogLogger) Warn(ctx context.Context, msg string, args ...any) {
	l.log.WarnContext(ctx, "gorm: "+fmt.Sprintf(msg, args...))
}

func (l *slogLogger) Error(ctx context.Context, msg string, args ...any) {
	l.log.ErrorContext(ctx, "gorm: "+fmt.Sprintf(msg, args...))
}

func (l *slogLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), _ error) {
	elapsed := time.Since(begin)
	if elapsed < slowQuery || !l.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	sql, rows := fc()
	l.log.DebugContext(ctx, "slow query", "elapsed", elapsed, "rows", rows, "sql", sql)
}

// ParamsFilter keeps bound values (API keys, message bodies) out of logged
// SQL: statements are logged with their placeholders.
func (l *slogLogger) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}
