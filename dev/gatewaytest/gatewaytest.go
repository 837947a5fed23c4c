// Package gatewaytest starts a whole gateway in-process for API tests: a
// workspace in a temp dir, the scripted fake LLM provider, and Temporal.
// One embedded Temporal server is shared by every gateway of a test binary
// (each gateway gets its own task queue), because starting one takes
// seconds; gateways that must survive a restart can get their own.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/gateway"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/temporalserver"
)

// Options shape a test gateway.
type Options struct {
	// Config is extra config.yaml text, merged over the test defaults
	// (server on a free port, fake providers, shared Temporal).
	Config string
	// Agents are agent definition files: name -> YAML.
	Agents map[string]string
	// Postgres stores the application data in a fresh PostgreSQL database.
	Postgres bool
	// Workspace reuses a workspace directory (restart tests); default a temp dir.
	Workspace string
	// Fake reuses a fake provider; default a new one.
	Fake *fakellm.Server
	// TemporalAddress points at an existing Temporal frontend; default the
	// shared embedded server.
	TemporalAddress string
}

// Gateway is a running test gateway.
type Gateway struct {
	*gateway.Gateway
	Fake      *fakellm.Server
	Workspace string
	t         testing.TB
}

var (
	sharedOnce sync.Once
	shared     *temporalserver.Server
	sharedErr  error
)

// SharedTemporal returns the frontend address of the test binary's shared
// embedded Temporal server, starting it on first use.
func SharedTemporal(t testing.TB) string {
	t.Helper()
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentry-temporal-")
		if err != nil {
			sharedErr = err
			return
		}
		opts, err := temporalserver.LoadDefaults()
		if err != nil {
			sharedErr = err
			return
		}
		opts.DataDir, opts.FrontendPort, opts.UIPort, opts.UIEnabled = dir, 0, 0, false
		opts.Logger = quietLogger()
		shared, sharedErr = temporalserver.Start(context.Background(), opts)
	})
	if sharedErr != nil {
		t.Fatalf("start shared Temporal: %v", sharedErr)
	}
	sweepAround(t, shared.FrontendAddress())
	return shared.FrontendAddress()
}

// StopShared stops the shared Temporal server (call from TestMain).
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

// Main is TestMain for packages using this harness.
func Main(m *testing.M) {
	testenv.Main(&stopper{m})
}

type stopper struct{ m *testing.M }

func (s *stopper) Run() int {
	code := s.m.Run()
	if sweepClient != nil {
		sweepClient.Close()
	}
	StopShared()
	return code
}

// failureLogger keeps the gateway's warnings and errors and prints them
// when the test fails, so a failure seen only in CI (a 500 whose cause the
// API does not say) shows its cause. AGENTRY_TEST_LOG logs everything to
// stderr instead.
func failureLogger(t testing.TB) *slog.Logger {
	if os.Getenv("AGENTRY_TEST_LOG") != "" {
		return quietLogger()
	}
	buf := &SafeBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			out := buf.String()
			if len(out) > 8000 {
				out = "..." + out[len(out)-8000:]
			}
			t.Logf("gateway warnings and errors:\n%s", out)
		}
	})
	return slog.New(warningsOnly{slog.NewTextHandler(buf, nil)})
}

// warningsOnly keeps records at WARN and above. Its Enabled stays at INFO
// (as before): the gateway tees its logger into the log file and the /logs
// buffer, which must still see every INFO record.
type warningsOnly struct{ slog.Handler }

func (h warningsOnly) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h warningsOnly) WithAttrs(as []slog.Attr) slog.Handler {
	return warningsOnly{h.Handler.WithAttrs(as)}
}

func (h warningsOnly) WithGroup(name string) slog.Handler {
	return warningsOnly{h.Handler.WithGroup(name)}
}

func quietLogger() *slog.Logger {
	if os.Getenv("AGENTRY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Start runs a gateway until the test ends.
func Start(t testing.TB, opts Options) *Gateway {
	t.Helper()
	fake := opts.Fake
	if fake == nil {
		fake = fakellm.New()
		if err := fake.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fake.Close)
	}
	ws := opts.Workspace
	if ws == "" {
		ws = t.TempDir()
	}
	temporalAddr := opts.TemporalAddress
	if temporalAddr == "" {
		temporalAddr = SharedTemporal(t)
	}
	for name, body := range opts.Agents {
		path := filepath.Join(ws, "agents", name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := fmt.Sprintf(`
server: {port: 0, api_key: %q}
temporal: {address: %q, task_queue: %q}
llm:
  default_provider: ollama
  providers:
    ollama: {type: ollama, base_url: %q, default_model: llama3.2}
    openai: {type: openai, base_url: %q, default_model: gpt-4o-mini, models: [gpt-4o-mini, gpt-4o, slow-200ms]}
    anthropic: {type: anthropic, base_url: %q, default_model: claude-3-5-haiku}
runtime: {ssrf: {enabled: true}}
# The fake's cloud models carry no price; the harness allows that (the
# default, block, is proved in internal/costs and e2e/chat_test.go).
costs: {unknown_pricing: allow}
`, TestAPIKey, temporalAddr, "tq-"+sanitize(t.Name()), fake.URL(), fake.URL()+"/v1", fake.URL())
	var cfg config.Config = config.Defaults()
	if err := config.Parse([]byte(base), "test-base.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	if opts.Config != "" {
		if err := config.Parse([]byte(opts.Config), "test.yaml", &cfg); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Postgres {
		cfg.Storage.Backend, cfg.Storage.DSN = "postgres", testenv.Postgres(t)
	}
	if err := config.Validate(&cfg); err != nil {
		t.Fatal(err)
	}
	loaded := &config.Loaded{Config: cfg, Workspace: config.Workspace{Root: ws}, StartDir: ws}
	logger := failureLogger(t)
	g, err := gateway.Start(context.Background(), gateway.Options{Config: loaded, Logger: logger, Version: "test", Notice: io.Discard})
	if err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		g.Shutdown(ctx)
	})
	return &Gateway{Gateway: g, Fake: fake, Workspace: ws, t: t}
}

// The wait for the server's answer to Expect: 100-continue is long: a client that
// gives up sends the body anyway, and a loaded machine then sees a broken
// pipe instead of the 413 under test.
var expectClient = &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 30 * time.Second}}

// TestAPIKey is the admin key of test gateways.
const TestAPIKey = "test-admin-key-0123456789"

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// Response is a decoded API answer.
type Response struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
}

// Do sends a request with the admin key. body may be nil, a string (sent
// as is) or any value (sent as JSON).
func (g *Gateway) Do(method, path string, body any) Response {
	return g.DoAs(TestAPIKey, method, path, body)
}

// DoAs sends a request with the given bearer key ("" sends none).
func (g *Gateway) DoAs(key, method, path string, body any) Response {
	g.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			g.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, g.URL()+path, r)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	client := http.DefaultClient
	if req.ContentLength > 1<<20 {
		// Like curl: announce a large body and let the server refuse it
		// (413) before it is sent, instead of racing a reset connection.
		req.Header.Set("Expect", "100-continue")
		client = expectClient
	}
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &out.JSON)
	return out
}
