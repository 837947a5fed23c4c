package models

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Schema migrations.
//
// Every Open runs, in one transaction that holds the migration lock:
//
//  1. GORM AutoMigrate of every registered model (creates tables, adds
//     columns and indexes; never drops anything);
//  2. the data migrations newer than the version recorded in
//     schema_migrations, in version order, each recorded as it runs.
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

var (
	registryMu sync.Mutex
	// registry is package-level because model files fill it from their
	// init functions, before any Store exists.
	registeredModels []any
	dataMigrations   []dataMigration
)

func init() {
	// Version 1 records that the schema was created; later data migrations
	// are registered beside the models they change, with the next version.
	registerDataMigration(dataMigration{Version: 1, Name: "baseline: tables of the registered models",
		Up: func(context.Context, *gorm.DB, string) error { return nil }})
}

// RegisterModels adds models (pointers to structs, e.g. &Agent{}) for Open
// to migrate. Call it from init in the file that declares the model.
// Registering a type twice is harmless.
func RegisterModels(models ...any) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, m := range models {
		t := reflect.TypeOf(m)
		if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			panic(fmt.Sprintf("models.RegisterModels: want a pointer to a struct, got %T", m))
		}
		if !containsType(registeredModels, t) {
			registeredModels = append(registeredModels, m)
		}
	}
}

// registerDataMigration adds a data migration; for model files' init.
func registerDataMigration(m dataMigration) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, have := range dataMigrations {
		if have.Version == m.Version {
			panic(fmt.Sprintf("models: data migration version %d registered twice (%q and %q)", m.Version, have.Name, m.Name))
		}
	}
	dataMigrations = append(dataMigrations, m)
}

func containsType(models []any, t reflect.Type) bool {
	for _, m := range models {
		if reflect.TypeOf(m) == t {
			return true
		}
	}
	return false
}

// modelsInOrder returns the registered models sorted by type name, so the
// order does not depend on init order; AutoMigrate then moves models that
// others reference by foreign key before them.
func modelsInOrder() []any {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := append([]any(nil), registeredModels...)
	sort.SliceStable(out, func(i, j int) bool {
		return reflect.TypeOf(out[i]).Elem().String() < reflect.TypeOf(out[j]).Elem().String()
	})
	return out
}

func migrationsInOrder() []dataMigration {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := append([]dataMigration(nil), dataMigrations...)
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
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
