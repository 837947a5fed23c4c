package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Schema migrations.
//
// Every Open runs, in one transaction that holds the migration lock:
//
//  1. GORM AutoMigrate of every model in schemaModels (creates tables, adds
//     columns and indexes; never drops anything);
//  2. the data migrations (dataMigrations) newer than the version recorded
//     in schema_migrations, in version order, each recorded as it runs.
//
// The lock makes concurrent Opens from several gateway processes safe: on
// PostgreSQL a transaction-scoped advisory lock, on SQLite the write lock
// that the immediate transaction takes at BEGIN. Both databases have
// transactional DDL, so a failed migration leaves the schema as it was.
//
// A database whose recorded version is newer than this binary knows is
// refused rather than used by older code.

// migrationLockKey identifies Agentry's migration advisory lock. Advisory
// locks are scoped to one database, so databases sharing a server do not
// wait for each other.
const migrationLockKey int64 = 0x4167656e74727931 // "Agentry1"

// dataMigration changes data (or schema beyond what AutoMigrate does) once.
// Versions start at 1, are unique and never reused; Up runs inside the
// migration transaction, after AutoMigrate.
type dataMigration struct {
	Version int
	Name    string
	Up      func(ctx context.Context, tx *gorm.DB, driver string) error
}

// schemaMigration records an applied data migration.
type schemaMigration struct {
	Version   int       `gorm:"primaryKey;autoIncrement:false"`
	Name      string    `gorm:"not null"`
	AppliedAt time.Time `gorm:"not null"`
}

func (schemaMigration) TableName() string { return "schema_migrations" }

// schemaModels are the tables Open migrates, in the order AutoMigrate is
// given them: sorted by type name (exported names first, as the registry
// that preceded this list sorted them), so a new model goes where its name
// sorts. AutoMigrate itself moves models that others reference by foreign
// key before them. TestSchemaModelsSorted keeps the order.
var schemaModels = []any{
	&AgentRun{},           // chat.go
	&Approval{},           // approvals.go
	&Artifact{},           // workboard.go
	&BudgetCounter{},      // ledger.go
	&ChannelCursor{},      // channels.go
	&ChannelMessage{},     // channels.go
	&ChannelOverride{},    // deliveries.go
	&ChannelSetting{},     // channels.go
	&ChatMessage{},        // chat.go
	&ChatSession{},        // chat.go
	&Comment{},            // workboard.go
	&CostReservation{},    // ledger.go
	&Delivery{},           // deliveries.go
	&DeliveryAttempt{},    // deliveries.go
	&Event{},              // events.go
	&Feedback{},           // chat.go
	&FleetMember{},        // fleetconfig.go
	&HookCursor{},         // deliveries_hooks.go
	&KnowledgeDocument{},  // knowledge.go
	&KnowledgeSource{},    // knowledge.go
	&KnowledgeText{},      // knowledge.go
	&LearningProposal{},   // chat.go
	&Lease{},              // leases.go
	&LedgerEntry{},        // ledger.go
	&MCPServer{},          // mcp.go
	&MemoryEntry{},        // memory.go
	&PackageInstallJob{},  // packageinstall.go
	&PeerRun{},            // peerruns.go
	&PriceVersion{},       // ledger.go
	&ProviderUsageLine{},  // reconcile.go
	&ReconciliationRun{},  // reconcile.go
	&RunMessage{},         // runlog.go
	&RunSnapshot{},        // runlog.go
	&ScheduleRun{},        // scheduleruns.go
	&Secret{},             // secrets.go
	&SecretKey{},          // secretkeys.go
	&Task{},               // workboard.go
	&TaskRun{},            // workboard.go
	&VectorBase{},         // vectors.go
	&VectorChunk{},        // vectors.go
	&WebhookIdempotency{}, // webhookidempotency.go
	&WebhookRun{},         // webhookruns.go
	&healthProbe{},        // storage.go
}

// dataMigrations run after AutoMigrate, in this order, which is the order of
// their versions: a new one is appended with the next version (and written
// beside the models it changes).
var dataMigrations = []dataMigration{
	{Version: 1, Name: "baseline: tables of the registered models",
		Up: func(context.Context, *gorm.DB, string) error { return nil }},
	{Version: 2, Name: "ids never reused: id sequences past every id events have seen",
		Up: raiseIDSequences}, // sequences.go
	{Version: 3, Name: "agent_runs: drop the agent_id and session_id indexes no query uses",
		Up: dropIndexes("idx_agent_runs_agent_id", "idx_agent_runs_session_id")},
	{Version: 4, Name: "agent_runs: drop the response_id index no query uses",
		Up: dropIndexes("idx_agent_runs_response_id")},
	{Version: 5, Name: "chat_messages: ids without AUTOINCREMENT on SQLite",
		Up: dropMessagesAutoincrement}, // chat.go
	{Version: 6, Name: "chat_messages: found by their session's sequential key, not its random id",
		Up: keyMessagesBySession}, // sessionkey.go
	{Version: 7, Name: "chat_sessions: keyed by their sequential key on SQLite, without an index on the id",
		Up: keySessionsByKey},
	{Version: 8, Name: "chat_sessions: an index on the id on SQLite (superseded by 9, now nothing)",
		Up: indexSessionIDs},
	{Version: 9, Name: "chat_sessions: found by id through chat_session_ids on SQLite, not an index on the id",
		Up: digestSessionIDs},
	{Version: 10, Name: "chat_sessions: drop the agent_id index no query uses",
		Up: dropIndexes("idx_chat_sessions_agent_id")},
	{Version: 11, Name: "chat_sessions: an index on (agent_id, updated_at) for GET /memory?agent_id=",
		Up: indexSessionsByAgent}, // chat_index.go
	{Version: 12, Name: "memory_entries: the full-text index (FTS5 on SQLite, tsvector on PostgreSQL)",
		Up: memoryFullText}, // memory.go
	{Version: 13, Name: "vector_chunks: full-text index (FTS5 on SQLite, tsvector on PostgreSQL)",
		Up: createVectorSearch}, // vectors.go
}

// migrate brings the schema of s up to date with models and steps (sorted
// by version); see the comment at the top.
func migrate(ctx context.Context, s *Store, models []any, steps []dataMigration) error {
	latest := 0
	if len(steps) > 0 {
		latest = steps[len(steps)-1].Version
	}

	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if s.Driver == DriverPostgres {
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", migrationLockKey).Error; err != nil {
				return fmt.Errorf("take migration lock: %w", err)
			}
		}
		if err := tx.AutoMigrate(&schemaMigration{}); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var current int
		if err := tx.Model(&schemaMigration{}).Select("COALESCE(MAX(version), 0)").Scan(&current).Error; err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if current > latest {
			return fmt.Errorf("database schema version %d is newer than this Agentry supports (%d); upgrade Agentry or use another database", current, latest)
		}
		if len(models) > 0 {
			autoMigrate := func() error { return tx.AutoMigrate(models...) }
			if s.Driver == DriverSQLite {
				// GORM may rebuild a table, which would reset its id
				// sequence (see sequences.go).
				err := keepSQLiteSequences(tx, autoMigrate)
				if err != nil {
					return fmt.Errorf("auto-migrate models: %w", err)
				}
			} else if err := autoMigrate(); err != nil {
				return fmt.Errorf("auto-migrate models: %w", err)
			}
		}
		for _, step := range steps {
			if step.Version <= current {
				continue
			}
			// An existing database may take a while (a table rebuilt):
			// say what runs, so a slow start is not a silent one.
			upgrading := current > 0
			started := time.Now()
			if upgrading {
				s.log.Info("applying data migration", "version", step.Version, "name", step.Name)
			}
			if err := step.Up(ctx, tx, s.Driver); err != nil {
				return fmt.Errorf("data migration %d (%s): %w", step.Version, step.Name, err)
			}
			if upgrading {
				s.log.Info("data migration applied", "version", step.Version, "took", time.Since(started).Round(time.Millisecond).String())
			}
			rec := schemaMigration{Version: step.Version, Name: step.Name, AppliedAt: time.Now().UTC()}
			if err := tx.Create(&rec).Error; err != nil {
				return fmt.Errorf("record data migration %d: %w", step.Version, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate %s database: %w", s.Driver, err)
	}
	return nil
}

// SchemaVersion returns the version of the newest data migration applied
// to the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.DB.WithContext(ctx).Model(&schemaMigration{}).Select("COALESCE(MAX(version), 0)").Scan(&v).Error
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
