package models

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/agentryhq/agentry/dev/testenv"
)

func TestMain(m *testing.M) {
	// The test-only models are migrated with the real ones, after them
	// (where their lower-case names sorted).
	schemaModels = append(schemaModels, &testGadget{}, &testWidget{})
	testenv.Main(m)
}

// Test-only models, migrated like real ones (see TestMain). testGadget sorts before
// testWidget but references it, so Open must order them by dependency.
type testWidget struct {
	ID        uint   `gorm:"primaryKey"`
	Name      string `gorm:"uniqueIndex;not null"`
	Color     string
	CreatedAt time.Time
}

func (testWidget) TableName() string { return "test_widgets" }

type testGadget struct {
	ID       uint `gorm:"primaryKey"`
	WidgetID uint `gorm:"not null"`
	Widget   testWidget
}

func (testGadget) TableName() string { return "test_gadgets" }

// backend opens a fresh, empty database of one kind per call.
type backend struct {
	name string
	opts func(t *testing.T) Options
}

var backends = []backend{
	{DriverSQLite, func(t *testing.T) Options {
		// Nested, not yet existing directories: Open creates them.
		return Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "workspace", "data", "agentry.db")}
	}},
	{DriverPostgres, func(t *testing.T) Options {
		return Options{Driver: DriverPostgres, DSN: testenv.Postgres(t)}
	}},
}

func forEachBackend(t *testing.T, test func(t *testing.T, opts Options)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.opts(t))
		})
	}
}

func mustOpen(t testing.TB, opts Options) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", opts.Driver, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenMigratesAndStores(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		s := mustOpen(t, opts)
		if s.Driver != opts.Driver {
			t.Errorf("Store.Driver = %q, want %q", s.Driver, opts.Driver)
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"schema_migrations", "test_widgets", "test_gadgets"} {
			if !s.DB.Migrator().HasTable(table) {
				t.Errorf("table %s missing after Open", table)
			}
		}
		version, err := s.SchemaVersion(ctx)
		if err != nil || version != latestVersion() {
			t.Errorf("SchemaVersion = %d, %v; want %d", version, err, latestVersion())
		}

		created := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
		w := testWidget{Name: "sprocket", Color: "blue", CreatedAt: created}
		if err := s.DB.WithContext(ctx).Create(&w).Error; err != nil {
			t.Fatal(err)
		}
		if w.ID == 0 {
			t.Fatal("Create did not fill the primary key")
		}
		var got testWidget
		if err := s.DB.WithContext(ctx).First(&got, "name = ?", "sprocket").Error; err != nil {
			t.Fatal(err)
		}
		if got.ID != w.ID || got.Color != "blue" || !got.CreatedAt.Equal(created) {
			t.Errorf("read back %+v, want %+v", got, w)
		}
		if err := s.DB.WithContext(ctx).Create(&testWidget{Name: "sprocket"}).Error; err == nil {
			t.Error("unique index not enforced")
		}
		if err := s.DB.WithContext(ctx).Create(&testGadget{WidgetID: w.ID}).Error; err != nil {
			t.Errorf("insert referencing an existing row: %v", err)
		}
		if err := s.DB.WithContext(ctx).Create(&testGadget{WidgetID: w.ID + 1000}).Error; err == nil {
			t.Error("foreign key not enforced")
		}
	})
}

func TestReopenIsIdempotent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		first := mustOpen(t, opts)
		if err := first.DB.Create(&testWidget{Name: "kept"}).Error; err != nil {
			t.Fatal(err)
		}
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			s := mustOpen(t, opts)
			var n int64
			if err := s.DB.WithContext(ctx).Model(&testWidget{}).Where("name = ?", "kept").Count(&n).Error; err != nil || n != 1 {
				t.Fatalf("after reopen: %d rows, %v; want the 1 row written before", n, err)
			}
			assertMigrationsRecordedOnce(t, s)
			s.Close()
		}
	})
}

func TestConcurrentOpenOnOneDatabase(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		// Separate pools, as separate gateway processes would have, all
		// migrating a fresh database at the same moment.
		const processes = 4
		stores := make([]*Store, processes)
		errs := make([]error, processes)
		var wg sync.WaitGroup
		for i := range processes {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				stores[i], errs[i] = Open(ctx, opts)
			})
		}
		wg.Wait()
		for i := range processes {
			if errs[i] != nil {
				t.Errorf("Open #%d: %v", i, errs[i])
				continue
			}
			defer stores[i].Close()
		}
		if t.Failed() {
			return
		}
		assertMigrationsRecordedOnce(t, stores[0])
	})
}

func TestConcurrentReadThenWriteTransactions(t *testing.T) {
	// Transactions that read and then write are what fail with SQLITE_BUSY
	// when SQLite transactions start deferred; the store must queue them.
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		const writers, each = 8, 15
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					err := s.DB.Transaction(func(tx *gorm.DB) error {
						var n int64
						if err := tx.Model(&testWidget{}).Count(&n).Error; err != nil {
							return err
						}
						return tx.Create(&testWidget{Name: fmt.Sprintf("w%d-%d", w, i), Color: fmt.Sprint(n)}).Error
					})
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent transaction: %v", err)
		}
		var n int64
		if err := s.DB.Model(&testWidget{}).Count(&n).Error; err != nil || n != writers*each {
			t.Errorf("%d rows, %v; want %d", n, err, writers*each)
		}
	})
}

func TestDataMigrationsRunOnceInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		s := mustOpen(t, opts)
		var ran []int
		steps := append(slices.Clone(dataMigrations),
			dataMigration{Version: 1001, Name: "seed", Up: func(ctx context.Context, tx *gorm.DB, driver string) error {
				ran = append(ran, 1001)
				if driver != opts.Driver {
					return fmt.Errorf("got driver %q", driver)
				}
				return tx.Create(&testWidget{Name: "seeded"}).Error
			}},
			dataMigration{Version: 1002, Name: "recolor", Up: func(ctx context.Context, tx *gorm.DB, _ string) error {
				ran = append(ran, 1002)
				return tx.Model(&testWidget{}).Where("name = ?", "seeded").Update("color", "green").Error
			}},
		)
		for range 2 {
			if err := migrate(ctx, s, schemaModels, steps); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(ran) != "[1001 1002]" {
			t.Errorf("data migrations ran %v, want [1001 1002] once each", ran)
		}
		var w testWidget
		if err := s.DB.First(&w, "name = ?", "seeded").Error; err != nil || w.Color != "green" {
			t.Errorf("seeded row %+v, %v", w, err)
		}
		if v, err := s.SchemaVersion(ctx); err != nil || v != 1002 {
			t.Errorf("SchemaVersion = %d, %v; want 1002", v, err)
		}
	})
}

func TestFailedDataMigrationChangesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		s := mustOpen(t, opts)
		steps := append(slices.Clone(dataMigrations), dataMigration{Version: 1001, Name: "broken", Up: func(ctx context.Context, tx *gorm.DB, _ string) error {
			if err := tx.Create(&testWidget{Name: "half-done"}).Error; err != nil {
				return err
			}
			return errors.New("boom")
		}})
		err := migrate(ctx, s, schemaModels, steps)
		if err == nil || !strings.Contains(err.Error(), "data migration 1001 (broken)") {
			t.Fatalf("migrate error = %v, want one naming the failed migration", err)
		}
		var n int64
		s.DB.Model(&testWidget{}).Where("name = ?", "half-done").Count(&n)
		if v, _ := s.SchemaVersion(ctx); n != 0 || v != latestVersion() {
			t.Errorf("after a failed migration: %d partial rows, version %d; want 0 and %d", n, v, latestVersion())
		}
	})
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		if err := s.DB.Create(&schemaMigration{Version: 999999, Name: "from the future", AppliedAt: time.Now()}).Error; err != nil {
			t.Fatal(err)
		}
		s.Close()
		_, err := Open(context.Background(), opts)
		if err == nil || !strings.Contains(err.Error(), "newer than this Agentry supports") {
			t.Fatalf("Open on a newer schema: %v", err)
		}
	})
}

func TestSQLiteSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "c", "agentry.db")
	s := mustOpen(t, Options{DSN: path}) // driver defaults to SQLite
	if s.Driver != DriverSQLite {
		t.Fatalf("default driver %q", s.Driver)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not created in nested directory: %v", err)
	}
	// Every pooled connection must carry the pragmas, not just the first:
	// hold several connections at once and ask each.
	ctx := context.Background()
	sqlDB, _ := s.DB.DB()
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range defaultSQLiteConns {
		c, err := sqlDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"busy_timeout": "10000",
			"foreign_keys": "1",
			"synchronous":  "1", // NORMAL
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
			}
		}
	}
	if got := sqlDB.Stats().MaxOpenConnections; got != defaultSQLiteConns+1 { // + the writer's own
		t.Errorf("pool limit %d, want %d", got, defaultSQLiteConns+1)
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"unknown driver", Options{Driver: "mysql", DSN: "x"}, `unknown storage driver "mysql"`},
		{"empty sqlite DSN", Options{}, "SQLite needs a file path"},
		{"empty postgres DSN", Options{Driver: "postgres"}, "PostgreSQL needs a connection string"},
		{"sqlite URI", Options{DSN: "file:x.db?mode=memory"}, "must be a plain file path"},
		{"sqlite memory", Options{DSN: ":memory:"}, "must be a plain file path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(ctx, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestOpenUnreachablePostgresKeepsPasswordSecret(t *testing.T) {
	port := testenv.FreePort(t) // nothing listens there
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=agentry password=s3cret-pw dbname=agentry sslmode=disable connect_timeout=5", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, Options{Driver: DriverPostgres, DSN: dsn})
	if err == nil {
		t.Fatal("Open succeeded without a server")
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("error leaks the password: %v", err)
	}
	if !strings.Contains(err.Error(), "ping postgres database") {
		t.Errorf("error does not say what failed: %v", err)
	}
}

func TestSlowQueriesLoggedWithoutValues(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := Options{Driver: DriverPostgres, DSN: testenv.Postgres(t), Logger: log}
	s := mustOpen(t, opts)
	// pg_sleep makes the statement slow by construction, not by luck.
	if err := s.DB.Exec("SELECT pg_sleep(?), ?::text", slowQuery.Seconds()+0.05, "s3cret-value").Error; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if !strings.Contains(out, "slow query") || !strings.Contains(out, "pg_sleep") {
		t.Errorf("slow query not logged at debug:\n%s", out)
	}
	if strings.Contains(out, "s3cret-value") {
		t.Errorf("logged SQL contains a bound value:\n%s", out)
	}
}

type lockedWriter struct {
	buf *bytes.Buffer
	mu  *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestSchemaModelsSorted checks the migration list: pointers to structs,
// each once, sorted by type name (the order Open has always migrated them
// in); and data migrations numbered 1, 2, 3 ... in order.
func TestSchemaModelsSorted(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var prev string
	for i, m := range schemaModels {
		ty := reflect.TypeOf(m)
		if ty == nil || ty.Kind() != reflect.Pointer || ty.Elem().Kind() != reflect.Struct {
			t.Fatalf("schemaModels[%d] is %T, want a pointer to a struct", i, m)
		}
		if seen[ty] {
			t.Fatalf("schemaModels lists %s twice", ty)
		}
		seen[ty] = true
		name := ty.Elem().String()
		if name < prev {
			t.Errorf("schemaModels: %s after %s, want them sorted by type name", name, prev)
		}
		prev = name
	}
	for i, step := range dataMigrations {
		if step.Version != i+1 {
			t.Errorf("dataMigrations[%d] has version %d, want %d", i, step.Version, i+1)
		}
	}
}

func latestVersion() int {
	steps := dataMigrations
	return steps[len(steps)-1].Version
}

func assertMigrationsRecordedOnce(t *testing.T, s *Store) {
	t.Helper()
	var rows []schemaMigration
	if err := s.DB.Order("version").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(dataMigrations) {
		t.Fatalf("schema_migrations has %d rows, want %d (one per data migration): %+v", len(rows), len(dataMigrations), rows)
	}
}
