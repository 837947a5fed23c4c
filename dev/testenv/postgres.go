package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var postgresServer lazy

// Postgres returns the DSN of a brand-new, empty database, dropped when the
// test ends:
//
//	host=127.0.0.1 port=54321 user=postgres dbname=agentry_testname_1a2b3c4d sslmode=disable
//
// The server is the one named by AGENTRY_TEST_POSTGRES_DSN, or else one
// PostgreSQL started for this test binary on first use (stopped by Main).
// Safe for parallel tests.
func Postgres(t testing.TB) string {
	t.Helper()
	admin, err := postgresServer.get(func() (string, error) {
		if dsn := os.Getenv(EnvPostgresDSN); dsn != "" {
			return dsn, nil
		}
		began := time.Now()
		srv, err := startPostgres()
		if err != nil {
			return "", err
		}
		track(srv.proc)
		t.Logf("testenv: PostgreSQL ready on 127.0.0.1:%d in %s", srv.port, time.Since(began).Round(time.Millisecond))
		return srv.adminDSN, nil
	})
	if err != nil {
		var unavailable *unavailableError
		if errors.As(err, &unavailable) {
			reportUnavailable(t, "PostgreSQL", unavailable)
			return ""
		}
		t.Fatalf("testenv: start PostgreSQL: %v", err)
	}
	return createDatabase(t, admin)
}

// createDatabase creates a uniquely named database on the server behind
// adminDSN and drops it when the test ends.
func createDatabase(t testing.TB, adminDSN string) string {
	t.Helper()
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatalf("testenv: connect to the test PostgreSQL server%s: %v", fromEnvHint(EnvPostgresDSN), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, adminDSN, name) })
	dsn, err := withDatabase(adminDSN, name)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return dsn
}

// dropDatabase removes a test database; FORCE ends connections a test
// forgot to close. Failures are logged, not fatal: the test is over.
func dropDatabase(t testing.TB, adminDSN, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Logf("testenv: drop database %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("testenv: drop database %s: %v", name, err)
	}
}

// databaseName derives a valid, unique database name from a test name so a
// leftover database on a shared server says which test made it.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return "agentry_" + b.String() + "_" + randomHex(4) // at most 57 of PostgreSQL's 63 bytes
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(buf)
}

// withDatabase returns dsn pointing at database name. URL DSNs get a new
// path; keyword/value DSNs get a trailing dbname, which wins over an earlier
// one in both libpq and pgx.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse PostgreSQL URL: %v", err) // not %w: the URL may hold a password
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " dbname=" + name, nil
}

func fromEnvHint(env string) string {
	if os.Getenv(env) != "" {
		return " (from " + env + ")"
	}
	return ""
}

// postgresInstance is a PostgreSQL server started by this test binary.
type postgresInstance struct {
	proc     *process
	port     int
	adminDSN string
}

// startPostgres initialises a throw-away cluster in a temporary directory
// and starts it on a free loopback port, tuned for tests (no fsync), with
// trust authentication for user postgres over TCP only.
func startPostgres() (*postgresInstance, error) {
	binDir, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	dir, err := makeServerDir("pg")
	if err != nil {
		return nil, err
	}
	inst, err := startPostgresIn(dir, binDir, cred)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	inst.proc.dir = dir // from now on stop removes it
	return inst, nil
}

func startPostgresIn(dir, binDir string, cred *syscall.Credential) (*postgresInstance, error) {
	if cred != nil {
		// PostgreSQL refuses to run as root: the data and socket directory
		// belong to the unprivileged user the server runs as.
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("hand PostgreSQL directory to the postgres user: %w", err)
		}
	}
	dataDir := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(binDir, "initdb"),
		"-D", dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions")
	initdb.Dir = dir // the test's working directory may not be readable by postgres
	initdb.Env = serverEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, strings.TrimSpace(string(out)))
	}

	logPath := filepath.Join(dir, "postgres.log")
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("find a free port for PostgreSQL: %w", err)
		}
		cmd := exec.Command(filepath.Join(binDir, "postgres"),
			"-D", dataDir,
			"-p", strconv.Itoa(port),
			"-k", dir,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "max_connections=300", // many test databases, each with a pool
			"-c", "fsync=off", // durability is worthless for throw-away data
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "log_min_messages=warning",
		)
		cmd.Dir = dir
		cmd.Env = serverEnv()
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		// SIGINT is PostgreSQL's "fast" shutdown (disconnect clients, stop);
		// SIGQUIT, sent if the test binary dies, is "immediate".
		proc, err := startProcess("PostgreSQL", cmd, logPath, syscall.SIGINT, syscall.SIGQUIT)
		if err != nil {
			return nil, err
		}
		adminDSN := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", port)
		err = proc.waitReady(readyTimeout, func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, adminDSN)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			// Check the data directory, not just the connection: another
			// server that took the port first must not pass for ours.
			var served string
			if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&served); err != nil {
				return err
			}
			if served != dataDir {
				return fmt.Errorf("port %d is served by another PostgreSQL (%s)", port, served)
			}
			return nil
		})
		if err == nil {
			return &postgresInstance{proc: proc, port: port, adminDSN: adminDSN}, nil
		}
		_ = proc.stop()
		if attempt < portAttempts && proc.portConflict() {
			_ = os.Truncate(logPath, 0)
			continue
		}
		return nil, err
	}
}

// findPostgresBin returns the directory holding initdb and postgres: the
// one of initdb on PATH, else the newest /usr/lib/postgresql/*/bin.
func findPostgresBin() (string, error) {
	if without("postgres") {
		return "", &unavailableError{"PostgreSQL treated as not installed (" + EnvWithout + ")"}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	candidates, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(candidates, func(i, j int) bool { return versionOf(candidates[i]) > versionOf(candidates[j]) })
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", &unavailableError{"PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin; install postgresql or set " + EnvPostgresDSN}
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// postgresCredential returns the identity to run PostgreSQL under: nil
// (ourselves) unless we are root, which PostgreSQL refuses, in which case
// the postgres OS user.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, &unavailableError{"running as root, and PostgreSQL refuses root, but there is no 'postgres' OS user to run it as: " + err.Error()}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user id %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres group id %q: %w", u.Gid, err)
	}
	// No Groups (and NoSetGroups false): the child drops root's supplementary groups.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
