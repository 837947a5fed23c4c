package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// TestMain does what Main does, then proves the promise Main makes: every
// server this binary started is gone and so is its directory.
func TestMain(m *testing.M) {
	code := m.Run()

	startedMu.Lock()
	procs := append([]*process(nil), started...)
	startedMu.Unlock()
	if err := stopAll(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: cleanup: %v\n", err)
		code = 1
	}
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.Signal(0)); err == nil {
			fmt.Fprintf(os.Stderr, "testenv: %s (pid %d) still running after Main's cleanup\n", p.name, p.cmd.Process.Pid)
			code = 1
		}
		if _, err := os.Stat(p.dir); !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "testenv: %s directory %s still exists after Main's cleanup\n", p.name, p.dir)
			code = 1
		}
	}
	os.Exit(code)
}

func TestFreePort(t *testing.T) {
	port := FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("FreePort returned %d, which cannot be bound: %v", port, err)
	}
	l.Close()
}

func pgConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %q: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestPostgresGivesFreshDatabases(t *testing.T) {
	ctx := context.Background()
	first, second := Postgres(t), Postgres(t)
	if first == second {
		t.Fatalf("two calls returned the same DSN %q", first)
	}
	for _, want := range []string{"host=127.0.0.1", "user=postgres", "sslmode=disable", "dbname=agentry_testpostgresgivesfreshdatabases_"} {
		if os.Getenv(EnvPostgresDSN) == "" && !strings.Contains(first, want) {
			t.Errorf("DSN %q lacks %q", first, want)
		}
	}

	a, b := pgConnect(t, first), pgConnect(t, second)
	var tables int
	if err := a.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("fresh database has %d tables", tables)
	}
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_first (id int)"); err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := b.QueryRow(ctx, "SELECT to_regclass('only_in_first') IS NOT NULL").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatal("a table created in one database is visible in the other")
	}
}

func TestPostgresDropsDatabaseAfterTest(t *testing.T) {
	var dsn string
	t.Run("user", func(t *testing.T) { dsn = Postgres(t) })
	if dsn == "" {
		t.Skip("PostgreSQL unavailable")
	}
	name := dsn[strings.LastIndex(dsn, "dbname=")+len("dbname="):]
	name = strings.Fields(name)[0]
	admin, err := postgresServer.get(nil) // started by the subtest
	if err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := pgConnect(t, admin).QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestPostgresParallelCallers(t *testing.T) {
	for i := range 6 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			conn := pgConnect(t, Postgres(t))
			if _, err := conn.Exec(context.Background(), "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRedisIsolatesCallers(t *testing.T) {
	ctx := context.Background()
	clients := make([]*redis.Client, 2)
	for i := range clients {
		opts, err := redis.ParseURL(Redis(t))
		if err != nil {
			t.Fatal(err)
		}
		if opts.DB == 0 {
			t.Fatal("DB 0 holds the allocation counter and must not be handed out")
		}
		clients[i] = redis.NewClient(opts)
		t.Cleanup(func() { clients[i].Close() })
	}
	if n, err := clients[0].DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("fresh Redis database has %d keys (err %v)", n, err)
	}
	if err := clients[0].Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := clients[1].Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("key set through one URL is visible through the other (err %v)", err)
	}
}

func TestRedisFlushesAfterTest(t *testing.T) {
	var url string
	t.Run("user", func(t *testing.T) {
		url = Redis(t)
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(opts)
		defer c.Close()
		if err := c.Set(context.Background(), "left", "over", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if url == "" {
		t.Skip("Redis unavailable")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if n, err := c.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Fatalf("Redis database %d has %d keys after its test ended (err %v)", opts.DB, n, err)
	}
}

// TestPrivateServersStartAndStop exercises the self-start path even when CI
// provides shared servers through the environment.
func TestPrivateServersStartAndStop(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		srv, err := startPostgres()
		skipIfUnavailable(t, err)
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				srv.proc.stop()
			}
		})
		dsn, err := withDatabase(srv.adminDSN, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		var one int
		if err := pgConnect(t, dsn).QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		assertStops(t, srv.proc)
		stopped = true
	})
	t.Run("redis", func(t *testing.T) {
		srv, err := startRedis()
		skipIfUnavailable(t, err)
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				srv.proc.stop()
			}
		})
		opts, err := redis.ParseURL(srv.url)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(opts)
		defer c.Close()
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		assertStops(t, srv.proc)
		stopped = true
	})
}

func skipIfUnavailable(t *testing.T, err error) {
	t.Helper()
	var unavailable *unavailableError
	if errors.As(err, &unavailable) {
		reportUnavailable(t, "server", unavailable)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func assertStops(t *testing.T, p *process) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case <-p.exited:
	default:
		t.Fatal("process still running after stop")
	}
	if _, err := os.Stat(p.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory %s not removed (stat err %v)", p.dir, err)
	}
}

func TestStartupFailureCarriesServerLog(t *testing.T) {
	bin, err := findRedisServer()
	skipIfUnavailable(t, err)
	// An unknown option makes redis-server exit at once with a message;
	// the startup error must quote it.
	cmd := exec.Command(bin, "--port", "0", "--no-such-option", "x")
	proc, err := startProcess("Redis", cmd, filepath.Join(t.TempDir(), "redis.log"), syscall.SIGTERM, syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.stop()
	err = proc.waitReady(30*time.Second, func(ctx context.Context) error { return errors.New("not yet") })
	if err == nil || !strings.Contains(err.Error(), "exited during startup") || !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("startup error does not carry the server log: %v", err)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"host=127.0.0.1 port=5 user=postgres dbname=postgres sslmode=disable", "host=127.0.0.1 port=5 user=postgres dbname=postgres sslmode=disable dbname=x"},
		{"postgres://u:p@127.0.0.1:5/postgres?sslmode=disable", "postgres://u:p@127.0.0.1:5/x?sslmode=disable"},
		{"postgresql://127.0.0.1:5", "postgresql://127.0.0.1:5/x"},
	} {
		got, err := withDatabase(tc.in, "x")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil || cfg.Database != "x" {
			t.Errorf("pgx reads database %q from %q (err %v); want x", cfg.Database, got, err)
		}
	}
}

func TestDatabaseNameIsValidAndUnique(t *testing.T) {
	long := strings.Repeat("VeryLong/Test Name-", 10)
	a, b := databaseName(long), databaseName(long)
	if a == b {
		t.Fatal("two names for the same test are equal")
	}
	if len(a) > 63 {
		t.Fatalf("name %q is %d bytes, PostgreSQL allows 63", a, len(a))
	}
	for _, r := range a {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			t.Fatalf("name %q has character %q", a, r)
		}
	}
}

// fakeTB records how reportUnavailable ends a test without ending ours.
type fakeTB struct {
	testing.TB
	failed, skipped string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
}

func TestMissingServicePolicy(t *testing.T) {
	for _, tc := range []struct {
		name, ci, require string
		wantFail          bool
	}{
		{"local", "", "", false},
		{"ci", "true", "", true},
		{"required", "", "1", true},
		{"ci false", "false", "0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv(EnvRequireServices, tc.require)
			f := &fakeTB{TB: t}
			reportUnavailable(f, "PostgreSQL", &unavailableError{"initdb not found"})
			if tc.wantFail {
				if f.failed == "" || f.skipped != "" || !strings.Contains(f.failed, "initdb not found") {
					t.Fatalf("want a failure naming the reason, got fail=%q skip=%q", f.failed, f.skipped)
				}
			} else if f.skipped == "" || f.failed != "" || !strings.Contains(f.skipped, "initdb not found") {
				t.Fatalf("want a skip naming the reason, got fail=%q skip=%q", f.failed, f.skipped)
			}
		})
	}
}

func TestSweepRemovesDirsOfDeadBinaries(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mine, err := makeServerDir("sweeptest")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mine)
	orphan, err := makeServerDir("sweeptest")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(orphan)
	if err := os.WriteFile(filepath.Join(orphan, ownerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	sweepStaleServerDirs()
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory of a dead test binary survived the sweep (stat err %v)", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("directory of a live test binary was swept: %v", err)
	}
}
