package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// redisDatabases is how many DB indexes the servers we start offer;
	// isolation is one index per Redis call.
	redisDatabases = 4096
	// redisCounterKey, in DB 0, hands out DB indexes atomically, also across
	// test binaries sharing one server from AGENTRY_TEST_REDIS_URL.
	redisCounterKey = "agentry:testenv:next-db"
)

var redisServer lazy

// Redis returns the URL of an isolated, empty Redis database, e.g.
// redis://127.0.0.1:6380/7, flushed again when the test ends.
//
// Isolation is by DB index, not key prefix, so code under test needs no
// cooperation: each call takes the next index from a counter kept in DB 0
// (so DB 0 is never handed out) and flushes it. Indexes wrap around after
// databases-1 calls; a server from AGENTRY_TEST_REDIS_URL should therefore
// be started with many databases (dev/provision.sh uses --databases 4096), since
// Redis' default of 16 lets a long run reuse an index still in use.
//
// The server is the one named by AGENTRY_TEST_REDIS_URL, or else one
// redis-server started for this test binary on first use (stopped by Main).
// Safe for parallel tests.
func Redis(t testing.TB) string {
	t.Helper()
	base, err := redisServer.get(func() (string, error) {
		if u := os.Getenv(EnvRedisURL); u != "" {
			return u, nil
		}
		began := time.Now()
		srv, err := startRedis()
		if err != nil {
			return "", err
		}
		track(srv.proc)
		t.Logf("testenv: Redis ready on 127.0.0.1:%d in %s", srv.port, time.Since(began).Round(time.Millisecond))
		return srv.url, nil
	})
	if err != nil {
		var unavailable *unavailableError
		if errors.As(err, &unavailable) {
			reportUnavailable(t, "Redis", unavailable)
			return ""
		}
		t.Fatalf("testenv: start Redis: %v", err)
	}
	return allocateRedisDB(t, base)
}

// allocateRedisDB reserves the next DB index on the server at baseURL,
// empties it now and when the test ends, and returns its URL.
func allocateRedisDB(t testing.TB, baseURL string) string {
	t.Helper()
	opts, err := redis.ParseURL(baseURL)
	if err != nil {
		t.Fatalf("testenv: parse Redis URL%s: %v", fromEnvHint(EnvRedisURL), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	opts.DB = 0
	admin := redis.NewClient(opts)
	defer admin.Close()
	databases := 16 // Redis' default, assumed when CONFIG is disabled
	if cfg, err := admin.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(cfg["databases"]); err == nil {
			databases = n
		}
	}
	if databases < 2 {
		t.Fatalf("testenv: Redis server has %d database(s); isolation needs at least 2 (start it with --databases %d)", databases, redisDatabases)
	}
	seq, err := admin.Incr(ctx, redisCounterKey).Result()
	if err != nil {
		t.Fatalf("testenv: reserve a Redis database%s: %v", fromEnvHint(EnvRedisURL), err)
	}
	index := 1 + int((seq-1)%int64(databases-1))

	flush := func(ctx context.Context) error {
		o := *opts
		o.DB = index
		c := redis.NewClient(&o)
		defer c.Close()
		return c.FlushDB(ctx).Err()
	}
	if err := flush(ctx); err != nil {
		t.Fatalf("testenv: flush Redis database %d: %v", index, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := flush(ctx); err != nil {
			t.Logf("testenv: flush Redis database %d: %v", index, err)
		}
	})

	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatalf("testenv: parse Redis URL: %v", err)
	}
	u.Path = "/" + strconv.Itoa(index)
	u.RawPath = ""
	return u.String()
}

// redisInstance is a redis-server started by this test binary.
type redisInstance struct {
	proc *process
	port int
	url  string // without a DB index
}

// startRedis starts a memory-only redis-server on a free loopback port.
func startRedis() (*redisInstance, error) {
	bin, err := findRedisServer()
	if err != nil {
		return nil, err
	}
	dir, err := makeServerDir("redis")
	if err != nil {
		return nil, err
	}
	inst, err := startRedisIn(dir, bin)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	inst.proc.dir = dir
	return inst, nil
}

func startRedisIn(dir, bin string) (*redisInstance, error) {
	logPath := filepath.Join(dir, "redis.log")
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("find a free port for Redis: %w", err)
		}
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--dir", dir,
			"--save", "", // memory only: no RDB snapshots
			"--appendonly", "no",
			"--databases", strconv.Itoa(redisDatabases),
			"--daemonize", "no",
			"--logfile", "", // stdout, which goes to the log file
		)
		cmd.Dir = dir
		cmd.Env = serverEnv()
		proc, err := startProcess("Redis", cmd, logPath, syscall.SIGTERM, syscall.SIGKILL)
		if err != nil {
			return nil, err
		}
		baseURL := fmt.Sprintf("redis://127.0.0.1:%d", port)
		err = proc.waitReady(readyTimeout, func(ctx context.Context) error {
			c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
			defer c.Close()
			// Ask for the pid, not just PING: another Redis that took the
			// port first must not pass for ours.
			info, err := c.Info(ctx, "server").Result()
			if err != nil {
				return err
			}
			if want := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"; !strings.Contains(info, want) {
				return fmt.Errorf("port %d is served by another Redis", port)
			}
			return nil
		})
		if err == nil {
			return &redisInstance{proc: proc, port: port, url: baseURL}, nil
		}
		_ = proc.stop()
		if attempt < portAttempts && proc.portConflict() {
			_ = os.Truncate(logPath, 0)
			continue
		}
		return nil, err
	}
}

func findRedisServer() (string, error) {
	if without("redis") {
		return "", &unavailableError{"redis-server treated as not installed (" + EnvWithout + ")"}
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if isExecutable("/usr/bin/redis-server") {
		return "/usr/bin/redis-server", nil
	}
	return "", &unavailableError{"redis-server not found on PATH or in /usr/bin; install redis-server (apt-get install redis-server) or set " + EnvRedisURL}
}
