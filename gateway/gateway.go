// Package gateway assembles a running Agentry gateway from its
// configuration: workspace, database, authentication, Temporal (embedded or
// external), the in-process worker and the HTTP API. cmd/agentryd runs it;
// tests start it in-process.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/api"
	"github.com/agentryhq/agentry/internal/audit"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/console"
	"github.com/agentryhq/agentry/internal/logbuf"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/telemetry"
	"github.com/agentryhq/agentry/internal/temporalconn"
	"github.com/agentryhq/agentry/internal/voice"
	"github.com/agentryhq/agentry/models"
)

// EmbeddedTemporal is a Temporal server running inside this process.
type EmbeddedTemporal interface {
	FrontendAddress() string
	UIAddress() string
	Stop() error
}

// StartTemporalFunc starts the embedded Temporal server. It is injected so
// that only the binaries and tests that want the (large) embedded server
// link it.
type StartTemporalFunc func(ctx context.Context, cfg *config.Loaded, logger *slog.Logger) (EmbeddedTemporal, error)

// Options configure Start.
type Options struct {
	Config  *config.Loaded
	Logger  *slog.Logger
	Version string
	// StartTemporal is used when temporal.address is empty.
	StartTemporal StartTemporalFunc
	// Notice receives one-time messages for the operator (the generated API
	// key, the Web UI address). Defaults to stderr.
	Notice io.Writer
}

// Gateway is a running gateway.
type Gateway struct {
	Config   *config.Loaded
	Store    *models.Store
	Temporal client.Client
	// APIKey is the effective admin key in apikey mode.
	APIKey string
	// Logs keeps the recent log lines for GET /logs (the logger tees into it).
	Logs *logbuf.Buffer

	log *slog.Logger
	// secrets are the configuration's secret values, registered with package
	// scrub for as long as the gateway runs.
	secrets  *scrub.Source
	embedded EmbeddedTemporal
	services *Services
	api      *api.Server
	ln       net.Listener
	serveErr chan error
	// Telemetry: tracing export, audit log, optional metrics listener.
	tracing    *telemetry.Tracing
	audit      *audit.Log
	metricsSrv *http.Server
	stopOnce   sync.Once
}

// Start brings every part up in dependency order and starts serving. On any
// error everything already started is stopped again: the gateway never runs
// half-configured.
func Start(ctx context.Context, opts Options) (g *Gateway, err error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	notice := opts.Notice
	if notice == nil {
		notice = os.Stderr
	}
	// Everything the gateway logs is also kept in memory for GET /logs; both
	// copies are scrubbed of secrets first.
	logs := logbuf.New(logbuf.DefaultLines)
	log = slog.New(scrub.Handler(logbuf.NewHandler(log.Handler(), logs)))
	g = &Gateway{Config: cfg, log: log, serveErr: make(chan error, 1), Logs: logs, secrets: scrub.Register("config")}
	g.secrets.Set(configSecrets(&cfg.Config, "")...)
	warnUnknownKeys(cfg, log)
	defer func() {
		if err != nil {
			g.Shutdown(context.Background())
			g = nil
		}
	}()
	if err := cfg.Workspace.Ensure(); err != nil {
		return g, err
	}
	if err := g.startTelemetry(ctx, opts.Version); err != nil {
		return g, err
	}
	// Take the HTTP port first: a busy port should fail in a second, not
	// after Temporal has started.
	addr := net.JoinHostPort(cfg.Server.Host, strconv.Itoa(cfg.Server.Port))
	g.ln, err = net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return g, fmt.Errorf("gateway address %s is already in use; set server.port (AGENTRY_SERVER_PORT) to a free port", addr)
		}
		return g, fmt.Errorf("listen on %s: %w", addr, err)
	}
	g.Store, err = OpenStore(ctx, cfg, log)
	if err != nil {
		return g, err
	}
	g.APIKey, err = effectiveAPIKey(cfg, notice)
	if err != nil {
		return g, err
	}
	g.secrets.Set(configSecrets(&cfg.Config, g.APIKey)...)
	authn, err := auth.FromConfig(ctx, &cfg.Config, g.APIKey)
	if err != nil {
		return g, err
	}
	if err := g.connectTemporal(ctx, opts.StartTemporal, notice); err != nil {
		return g, err
	}
	g.services, err = NewServices(ctx, g, log)
	if err != nil {
		return g, err
	}
	g.services.observeState(g.services.bg)
	if cfg.Temporal.Worker.Enabled {
		if err := g.services.StartWorker(); err != nil {
			return g, err
		}
	}
	deps := api.Deps{
		Config:      cfg,
		Auth:        authn,
		Logger:      log,
		Version:     opts.Version,
		Health:      g.healthChecks(),
		Warnings:    g.healthWarnings(),
		Details:     g.healthDetails(),
		StorageFull: g.Store.NoteStorageFull,
		Features:    g.services.Features(),
		Public:      g.services.PublicFeatures(),
		OpenAI:      g.services.OpenAIFeature(),
		MCPServer:   g.services.MCPServerFeature(opts.Version),
		Audit:       g.audit,
	}
	if cfg.Server.GUIEnabled() {
		deps.Console = console.Assets()
		deps.ConsoleConnect = voice.ConsoleOrigins(cfg.Voice)
	}
	g.api = api.New(deps)
	g.services.StartChannels()
	go func() { g.serveErr <- g.api.Serve(g.ln) }()
	log.Info("gateway listening", "addr", g.URL(), "workspace", cfg.Workspace.Root, "config", cfg.Path)
	return g, nil
}

// OpenStore opens the application database the storage config names.
func OpenStore(ctx context.Context, cfg *config.Loaded, log *slog.Logger) (*models.Store, error) {
	opts := models.Options{Driver: cfg.Storage.Backend, DSN: cfg.Storage.DSN, MaxOpenConns: cfg.Storage.MaxOpenConns, WriteQueue: cfg.Storage.WriteQueue, CommitLinger: cfg.Storage.CommitLinger, SyncToDisk: cfg.Durability() == config.DurabilityPower, Logger: log,
		Scrub: scrub.Auto}
	if opts.Driver == "sqlite" && opts.DSN == "" {
		opts.DSN = filepath.Join(cfg.Workspace.DataDir(), "agentry.db")
	}
	st, err := models.Open(ctx, opts)
	if err != nil {
		if opts.Driver == "postgres" {
			// The key to fix, without the DSN (it carries the password).
			return nil, fmt.Errorf("open postgres database (storage.dsn, AGENTRY_STORAGE_DSN): %w", err)
		}
		return nil, fmt.Errorf("open %s database: %w", opts.Driver, err)
	}
	return st, nil
}

func (g *Gateway) connectTemporal(ctx context.Context, start StartTemporalFunc, notice io.Writer) error {
	cfg := g.Config
	address := cfg.Temporal.Address
	if address == "" {
		if start == nil {
			return errors.New("this build has no embedded Temporal server; set temporal.address (AGENTRY_TEMPORAL_ADDRESS) to an external cluster")
		}
		srv, err := start(ctx, cfg, g.log)
		if err != nil {
			return err
		}
		g.embedded = srv
		address = srv.FrontendAddress()
		if ui := srv.UIAddress(); ui != "" {
			fmt.Fprintf(notice, "Temporal Web UI: http://%s\n", ui)
		}
	}
	c, err := temporalconn.Dial(ctx, cfg.Temporal, address, g.log)
	if err != nil {
		return err
	}
	g.Temporal = c
	return nil
}

// effectiveAPIKey is server.api_key, or in apikey mode without one a key
// generated on first start, kept in the workspace credentials (0600) and
// printed once.
func effectiveAPIKey(cfg *config.Loaded, notice io.Writer) (string, error) {
	if cfg.Server.APIKey != "" || cfg.Auth.Mode != "apikey" {
		return cfg.Server.APIKey, nil
	}
	key, created, err := auth.LoadOrCreateKey(cfg.Workspace.APIKeyFile())
	if err != nil {
		return "", err
	}
	if created {
		fmt.Fprintf(notice, "Generated an API key (shown once; stored in %s):\n  %s\n", cfg.Workspace.APIKeyFile(), key)
	}
	return key, nil
}

func (g *Gateway) healthChecks() map[string]api.HealthCheck {
	checks := map[string]api.HealthCheck{
		// A write, not only a ping: a full disk must show here.
		"database": g.Store.CheckWritable,
		"temporal": func(ctx context.Context) error {
			_, err := g.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	}
	return checks
}

// healthWarnings are the alerting checks: spec cost rule 13 wants
// attribution below 100 % reported and alerted, but a crash or a full disk
// must not keep a gateway whose database and Temporal are fine out of
// service until UTC midnight (#42), so it is a warning, not a dependency.
func (g *Gateway) healthWarnings() map[string]api.HealthCheck {
	checks := map[string]api.HealthCheck{}
	if g.services != nil && g.services.Costs != nil {
		checks["costs"] = g.services.Costs.CheckAttribution
	}
	if g.services != nil && g.services.Code != nil {
		checks["sandbox"] = SandboxCheck(g.services.Code)
	}
	return checks
}

// healthDetails: the isolation run_python runs under, in /health.
func (g *Gateway) healthDetails() map[string]func() string {
	if g.services == nil || g.services.Code == nil {
		return nil
	}
	x := g.services.Code
	return map[string]func() string{"sandbox": func() string { return x.Isolation().Summary() }}
}

// Addr is the HTTP listen address (host:port).
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// URL is the base URL of the HTTP API: https:// when server.tls is on.
func (g *Gateway) URL() string {
	if g.Config != nil && g.Config.Server.TLS.Enabled {
		return "https://" + g.Addr()
	}
	return "http://" + g.Addr()
}

// TemporalUIAddress is the embedded Web UI address, or "".
func (g *Gateway) TemporalUIAddress() string {
	if g.embedded == nil {
		return ""
	}
	return g.embedded.UIAddress()
}

// Services exposes the wired feature services (tests use them).
func (g *Gateway) Services() *Services { return g.services }

// Done reports a fatal serve error.
func (g *Gateway) Done() <-chan error { return g.serveErr }

// Shutdown stops in reverse order: HTTP (draining requests), worker,
// Temporal client, embedded server, database. Safe to call more than once.
func (g *Gateway) Shutdown(ctx context.Context) error {
	var errs []error
	g.stopOnce.Do(func() {
		if g.Logs != nil {
			// Followers of GET /logs/stream end now, so draining requests
			// does not wait for them.
			g.Logs.EndStreams()
		}
		if g.api != nil {
			errs = append(errs, g.api.Shutdown(ctx))
		} else if g.ln != nil {
			g.ln.Close()
		}
		if g.services != nil {
			g.services.Stop()
		}
		if g.Temporal != nil {
			g.Temporal.Close()
		}
		if g.embedded != nil {
			errs = append(errs, g.embedded.Stop())
		}
		if g.Store != nil {
			errs = append(errs, g.Store.Close())
		}
		errs = append(errs, g.stopTelemetry(ctx))
		g.secrets.Close()
	})
	return errors.Join(errs...)
}

// ShutdownTimeout bounds a graceful stop.
func (g *Gateway) ShutdownTimeout() time.Duration {
	if d := g.Config.Server.ShutdownTimeout; d > 0 {
		return d
	}
	return 10 * time.Second
}

// StartWorker runs the worker half only: database, Temporal client and the
// worker, no HTTP API (`agentryd worker`).
func StartWorker(ctx context.Context, opts Options) (g *Gateway, err error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = slog.New(scrub.Handler(log.Handler()))
	g = &Gateway{Config: cfg, log: log, serveErr: make(chan error, 1), secrets: scrub.Register("config")}
	g.secrets.Set(configSecrets(&cfg.Config, cfg.Server.APIKey)...)
	warnUnknownKeys(cfg, log)
	defer func() {
		if err != nil {
			g.Shutdown(context.Background())
			g = nil
		}
	}()
	if err := cfg.Workspace.Ensure(); err != nil {
		return g, err
	}
	if err := g.startTelemetry(ctx, opts.Version); err != nil {
		return g, err
	}
	if g.Store, err = OpenStore(ctx, cfg, log); err != nil {
		return g, err
	}
	if err := g.connectTemporal(ctx, nil, io.Discard); err != nil {
		return g, err
	}
	if g.services, err = NewServices(ctx, g, log); err != nil {
		return g, err
	}
	return g, g.services.StartWorker()
}

// API exposes the HTTP server (tests walk its routes).
func (g *Gateway) API() *api.Server { return g.api }

// warnUnknownKeys names the keys of the config file that nothing reads (a
// typo does nothing otherwise; issue 43). They are kept, not refused.
func warnUnknownKeys(cfg *config.Loaded, log *slog.Logger) {
	for _, u := range config.UnknownKeysInFile(cfg.Path) {
		log.Warn("config: unknown key, read by nothing (kept in the file)", "key", u.Key, "did_you_mean", u.Near, "file", cfg.Path)
	}
}
