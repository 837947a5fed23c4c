package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/telemetry"
	"github.com/agentryhq/agentry/models"
)

// benchChat is a feature with one route that makes one LLM call through
// the router, the way the chat handler does, so a request passes every
// instrumented layer: the observe middleware (server span, HTTP metrics),
// authentication, the "chat <model>" span, the "cost admission" span and
// the LLM metrics at settlement (with the ledger gate), and the provider's
// HTTP call under otelhttp.
type benchChat struct{ router *llm.Router }

func (f benchChat) Register(r fiber.Router) {
	r.Post("/bench/chat", func(c *fiber.Ctx) error {
		resp, err := f.router.Do(c.UserContext(), &llm.Call{Provider: "ollama", Model: "llama3.2",
			Request: llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}, Meta: llm.CallMeta{Source: "bench", Subject: "admin"}})
		if err != nil {
			return err
		}
		return c.JSON(fiber.Map{"reply": resp.Content})
	})
}

// BenchmarkInstrumentation is the in-process cost of tracing on the HTTP
// middleware and the LLM call path: the same request with the exporter
// "none" (the default: spans are no-ops, metrics are recorded - they have
// no switch) and with OTLP/HTTP export to a collector on loopback at
// sample_ratio 1 (every span recorded, scrubbed and exported by the
// background goroutine, which competes for the same CPUs; the collector is
// a sink that discards, as a remote collector costs the gateway nothing). Two gates: none
// (the instrumentation's share is largest) and the SQLite cost ledger (as
// every real LLM call has). docs/benchmarks.md has the figures.
//
// Besides ns/op (wall time) it reports cpu-ns/op, the process's CPU time
// per request, which a loaded machine disturbs much less.
//
//	go test -run '^$' -bench Instrumentation -benchtime 3000x -count 3 ./api/
func BenchmarkInstrumentation(b *testing.B) {
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	// The collector is another process in production: a sink that reads
	// each export and answers 200 keeps its decoding out of the figure.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	for _, gate := range []string{"none", "ledger"} {
		for _, tracing := range []string{"off", "on"} {
			b.Run("gate="+gate+"/tracing="+tracing, func(b *testing.B) {
				otel.SetTracerProvider(noop.NewTracerProvider())
				tcfg := config.TelemetryConfig{Exporter: "none"}
				if tracing == "on" {
					tcfg = config.TelemetryConfig{Exporter: "otlp", Endpoint: sink.URL, SampleRatio: 1}
				}
				tr, err := telemetry.Setup(ctx, tcfg, "bench", quiet)
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					tr.Shutdown(ctx)
					otel.SetTracerProvider(noop.NewTracerProvider())
				}()
				p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: fake.URL(), MaxRetries: -1})
				if err != nil {
					b.Fatal(err)
				}
				router := llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama")
				if gate == "ledger" {
					router.SetGate(benchLedger(b))
				}
				cfg := &config.Loaded{Config: config.Defaults()}
				s := New(Deps{Config: cfg, Logger: quiet, Features: []Feature{benchChat{router}},
					Auth: auth.NewKeyAuthenticator([]auth.APIKey{{Key: testKey, Subject: "admin", Role: auth.RoleAdmin}})})
				handler := s.App().Handler()
				request := func() {
					var rc fasthttp.RequestCtx
					rc.Request.Header.SetMethod(fiber.MethodPost)
					rc.Request.SetRequestURI(Prefix + "/bench/chat")
					rc.Request.Header.Set(fiber.HeaderAuthorization, "Bearer "+testKey)
					handler(&rc)
					if rc.Response.StatusCode() != fiber.StatusOK {
						b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
					}
				}
				for i := 0; i < 50; i++ { // warm connections and caches
					request()
				}
				cpu := processCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					request()
				}
				b.StopTimer()
				// CPU time of the whole process per request (handler, the
				// in-process fake provider, the export goroutine, GC): on a
				// shared machine it varies far less than wall time.
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the user+system CPU time this process has used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchLedger is the cost controller on a fresh SQLite database, wrapped
// with its telemetry (the gate the gateway installs).
func benchLedger(b *testing.B) llm.Gate {
	ctx := context.Background()
	store, err := models.Open(ctx, models.Options{Driver: models.DriverSQLite, DSN: filepath.Join(b.TempDir(), "agentry.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg := config.Defaults()
	cfg.LLM.Providers = map[string]config.ProviderConfig{"ollama": {Type: "ollama", BaseURL: "http://127.0.0.1:1", Local: true}}
	ctrl, err := costs.New(ctx, costs.Options{Config: &cfg, Store: store})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctrl.Close() })
	return ctrl.Observed(nil)
}
