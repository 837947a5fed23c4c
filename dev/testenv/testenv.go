// Package testenv gives tests real, throw-away backing services: an
// ephemeral PostgreSQL server and an ephemeral Redis server, both on free
// loopback ports.
//
// Each test binary starts at most one server of each kind, lazily, the first
// time a test asks for one; every call then gets its own isolated piece of
// it (a brand-new database, a private Redis DB index). Servers are stopped
// and their temporary directories removed by Main, which a package wires
// into its TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// make test and CI (see dev/provision.sh) may instead start one server of each kind for the whole
// run and hand them over in AGENTRY_TEST_POSTGRES_DSN and
// AGENTRY_TEST_REDIS_URL; the helpers then use those servers and start
// nothing themselves.
//
// When a server cannot be provided because its binaries are missing, the
// test is skipped locally but fails in CI (CI=true or
// AGENTRY_TEST_REQUIRE_SERVICES=1): CI must never silently skip.
//
// The per-binary servers are package-level state on purpose: they are
// shared by every test of the binary and must outlive any single test.
package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
)

// Environment variables the harness reads.
const (
	// EnvPostgresDSN names an already running PostgreSQL server (any DSN
	// accepted by pgx, keyword/value or URL) whose user may CREATE DATABASE.
	EnvPostgresDSN = "AGENTRY_TEST_POSTGRES_DSN"
	// EnvRedisURL names an already running Redis server (redis:// URL).
	// Start it with many databases (--databases 4096): isolation is by DB index.
	EnvRedisURL = "AGENTRY_TEST_REDIS_URL"
	// EnvRequireServices set to "1" turns "binaries missing, skip" into a
	// test failure, as does CI=true.
	EnvRequireServices = "AGENTRY_TEST_REQUIRE_SERVICES"
	// EnvWithout lists services (comma-separated: postgres, redis) to treat
	// as not installed, to try the suite as a fresh machine would run it.
	EnvWithout = "AGENTRY_TEST_WITHOUT"
)

// without reports whether EnvWithout names service.
func without(service string) bool {
	for _, s := range strings.Split(os.Getenv(EnvWithout), ",") {
		if strings.EqualFold(strings.TrimSpace(s), service) {
			return true
		}
	}
	return false
}

// Main runs the tests of a package, stops every server this test binary
// started and exits with the tests' status. Call it from TestMain.
func Main(m interface{ Run() int }) {
	code := m.Run()
	if err := stopAll(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: cleanup: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. The
// port is released before returning, so another process may grab it in
// between; servers started here retry with a fresh port when that happens.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testenv: find a free port: %v", err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// requireServices reports whether a missing service must fail the test
// instead of skipping it.
func requireServices() bool {
	return os.Getenv("CI") == "true" || os.Getenv(EnvRequireServices) == "1"
}

// unavailableError means the machine cannot provide the service (binaries
// or the unprivileged user are missing), as opposed to a service that is
// installed but failed to start, which always fails the test.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

// reportUnavailable skips the test, or fails it where services are required.
func reportUnavailable(t testing.TB, service string, err *unavailableError) {
	t.Helper()
	if requireServices() {
		t.Fatalf("testenv: %s is required here (CI=true or %s=1) but unavailable: %s", service, EnvRequireServices, err.reason)
		return
	}
	t.Skipf("testenv: skipping, %s unavailable: %s", service, err.reason)
}

// lazy starts one server per test binary on first use and remembers the
// outcome, so a server that failed to start fails every caller quickly with
// the same message instead of being retried by each test.
type lazy struct {
	once   sync.Once
	target string // admin DSN or base URL of the server
	err    error
}

func (l *lazy) get(start func() (string, error)) (string, error) {
	l.once.Do(func() { l.target, l.err = start() })
	return l.target, l.err
}

var (
	startedMu sync.Mutex
	started   []*process // servers this binary started; stopped by Main
)

func track(p *process) {
	startedMu.Lock()
	defer startedMu.Unlock()
	started = append(started, p)
}

func stopAll() error {
	startedMu.Lock()
	procs := started
	started = nil
	startedMu.Unlock()
	var errs []error
	for _, p := range procs {
		if err := p.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
