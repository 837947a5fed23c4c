package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/agentryhq/agentry/dev/otlpcollector"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/scrub"
)

func TestUnknownExporterNamesTheKey(t *testing.T) {
	_, err := Setup(context.Background(), config.TelemetryConfig{Exporter: "jaeger"}, "test", nil)
	if err == nil || !strings.Contains(err.Error(), "telemetry.exporter") || !strings.Contains(err.Error(), "jaeger") {
		t.Fatalf("err %v", err)
	}
	if err := config.Validate(&config.Config{Telemetry: config.TelemetryConfig{Exporter: "jaeger"}}); err == nil ||
		!strings.Contains(err.Error(), "telemetry.exporter") {
		t.Fatalf("validate: %v", err)
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"collector:4318":                     "http://collector:4318/v1/traces",
		"http://collector:4318":              "http://collector:4318/v1/traces",
		"https://otlp.example.com/v1/traces": "https://otlp.example.com/v1/traces",
		"https://otlp.example.com/custom":    "https://otlp.example.com/custom",
	} {
		if got, err := endpointURL(in, "/v1/traces"); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	if _, err := endpointURL("ftp://x", "/v1/traces"); err == nil {
		t.Error("ftp accepted")
	}
}

// TestOTLPHTTPExportToARealReceiver sends spans over OTLP/HTTP (protobuf)
// to the dev collector on loopback: names, attributes, the service name
// and the configured headers arrive.
func TestOTLPHTTPExportToARealReceiver(t *testing.T) {
	col, err := otlpcollector.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	tr, err := Setup(context.Background(), config.TelemetryConfig{Exporter: "otlp", Endpoint: col.URL(), ServiceName: "agentry-test", SampleRatio: 1,
		Headers: map[string]string{"X-Api-Key": "collector-key"}}, "v1.2.3", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := Tracer().Start(context.Background(), "POST /api/v1/chat")
	_, child := Tracer().Start(ctx, "chat llama3.2")
	child.SetAttributes(attribute.String("gen_ai.request.model", "llama3.2"), attribute.Int64("gen_ai.usage.input_tokens", 12))
	child.End()
	parent.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]otlpcollector.Span{}
	for _, s := range col.Spans() {
		got[s.Name] = s
	}
	c, p := got["chat llama3.2"], got["POST /api/v1/chat"]
	if c.Service != "agentry-test" || c.Attributes["gen_ai.request.model"] != "llama3.2" || c.Attributes["gen_ai.usage.input_tokens"] != "12" ||
		c.TraceID != p.TraceID || c.ParentSpanID != p.SpanID || p.TraceID == "" {
		t.Fatalf("received %+v", col.Spans())
	}
	if h := col.Headers(); len(h) == 0 || h[0].Get("X-Api-Key") != "collector-key" {
		t.Fatalf("headers %v", h)
	}
	otel.SetTracerProvider(sdktrace.NewTracerProvider()) // leave no exporter behind
}

// TestUnreachableCollectorDropsCountsAndWarnsOnce: exports to a closed
// port fail; the spans are counted as dropped and one warning is logged
// however many batches fail.
func TestUnreachableCollectorDropsCountsAndWarnsOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	before := testutil.ToFloat64(spansDropped.WithLabelValues("export_failed"))
	tr, err := Setup(context.Background(), config.TelemetryConfig{Exporter: "otlp", Endpoint: addr, SampleRatio: 1}, "test", log)
	if err != nil {
		t.Fatalf("an unreachable endpoint must not fail the start: %v", err)
	}
	for batch := 0; batch < 3; batch++ {
		for i := 0; i < 10; i++ {
			_, s := Tracer().Start(context.Background(), "request")
			s.End()
		}
		if err := tr.queue.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	tr.Shutdown(context.Background())
	if got := testutil.ToFloat64(spansDropped.WithLabelValues("export_failed")) - before; got != 30 {
		t.Fatalf("dropped %v spans, want 30", got)
	}
	if n := strings.Count(logs.String(), "exporting spans failed"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
}

// blockingExporter never finishes an export until released.
type blockingExporter struct{ release chan struct{} }

func (b blockingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (blockingExporter) Shutdown(context.Context) error { return nil }

// TestFullQueueDropsInsteadOfBlocking: with an export hanging, ending
// more spans than the queue holds returns at once and counts the excess.
func TestFullQueueDropsInsteadOfBlocking(t *testing.T) {
	exp := blockingExporter{release: make(chan struct{})}
	p := newBoundedProcessor(exp, 8, slog.New(slog.DiscardHandler))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	before := testutil.ToFloat64(spansDropped.WithLabelValues("queue_full"))
	const n = batchSize + 100
	for i := 0; i < n; i++ {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
	}
	// The run loop holds at most one batch and the queue 8 spans; the
	// rest must have been dropped, not waited for.
	if got := testutil.ToFloat64(spansDropped.WithLabelValues("queue_full")) - before; got < n-batchSize-8 {
		t.Fatalf("dropped %v, want at least %d", got, n-batchSize-8)
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDefaultsSurviveTheEnvironment: the defaults record every trace and
// serve /metrics, also after the AGENTRY_* environment is applied.
func TestDefaultsSurviveTheEnvironment(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "AGENTRY_TELEMETRY_EXPORTER" {
			return "otlp", true
		}
		return "", false
	}
	cfg := config.Defaults()
	if err := config.ApplyEnv(context.Background(), &cfg, env); err != nil {
		t.Fatal(err)
	}
	if cfg.Telemetry.Exporter != "otlp" || cfg.Telemetry.SampleRatio != 1 || !cfg.Telemetry.Metrics.Enabled {
		t.Fatalf("telemetry after env: %+v", cfg.Telemetry)
	}
}

// TestExportedSpansAreScrubbed: a registered secret and credential-shaped
// strings (a key in a URL query, as otelhttp records url.full; a bearer
// token in an error) never leave the process, in attributes, string
// slices, event attributes, the status or the name. Through Setup the
// real OTLP receiver gets the scrubbed span.
func TestExportedSpansAreScrubbed(t *testing.T) {
	const secret = "telemetry-registered-secret-42"
	src := scrub.Register("telemetry-test")
	src.Set(secret)
	defer src.Close()
	record := func(tp *sdktrace.TracerProvider) {
		_, s := tp.Tracer("t").Start(context.Background(), "GET /files/"+secret)
		s.SetAttributes(attribute.String("url.full", "https://generativelanguage.example/v1/models?key=AIzaSyA0123456789abcdefghijklmnopqrstu"),
			attribute.String("agentry.note", "uses "+secret), attribute.StringSlice("list", []string{"ok", secret}), attribute.Int("n", 7))
		s.RecordError(errors.New("upstream said: Authorization: Bearer abcdef0123456789abcdef0123456789"))
		s.SetStatus(codes.Error, "failed with "+secret)
		s.End()
	}
	leaks := func(text string) bool {
		return strings.Contains(text, secret) || strings.Contains(text, "AIzaSyA0123456789") || strings.Contains(text, "abcdef0123456789abcdef")
	}

	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(scrubExporter{mem}))
	record(tp)
	got := mem.GetSpans()
	if len(got) != 1 {
		t.Fatalf("%d spans", len(got))
	}
	s := got[0]
	text := fmt.Sprint(s.Name, s.Attributes, s.Events, s.Status)
	if leaks(text) || !strings.Contains(text, scrub.Redacted) {
		t.Fatalf("exported span not scrubbed: %s", text)
	}
	if fmt.Sprint(s.Attributes) == "" || !strings.Contains(fmt.Sprint(s.Attributes), "7") {
		t.Fatalf("non-string attributes lost: %v", s.Attributes)
	}

	col, err := otlpcollector.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	tr, err := Setup(context.Background(), config.TelemetryConfig{Exporter: "otlp", Endpoint: col.URL(), SampleRatio: 1}, "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	record(tr.provider)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	received := fmt.Sprint(col.Spans())
	if len(col.Spans()) != 1 || leaks(received) || !strings.Contains(received, "url.full") {
		t.Fatalf("collector received %s", received)
	}
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
}

// BenchmarkMetricsPerChat is what the metrics cost one chat request: the
// HTTP counter and histogram and the LLM call's counters and histogram
// (recorded whatever telemetry.exporter says; docs/benchmarks/2026-11-history.md).
//
//	go test -run '^$' -bench MetricsPerChat ./internal/telemetry/
func BenchmarkMetricsPerChat(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ObserveHTTP("/api/v1/chat", "POST", 200, time.Millisecond)
		LLMCallSettled("ollama", "llama3.2", "ok", 20, 5, 0, time.Millisecond)
	}
}

// traceReceiver is an OTLP/gRPC trace receiver (the collector's own
// service definition) that keeps what it is sent.
type traceReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	auth  []string
}

func (r *traceReceiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	r.auth = append(r.auth, md.Get("x-api-key")...)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.names = append(r.names, s.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestOTLPGRPCExportToARealReceiver: exporter otlp-grpc sends spans (with
// the configured headers as metadata) to a gRPC receiver on loopback.
func TestOTLPGRPCExportToARealReceiver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	recv := &traceReceiver{}
	coltracepb.RegisterTraceServiceServer(srv, recv)
	go srv.Serve(ln)
	defer srv.Stop()
	tr, err := Setup(context.Background(), config.TelemetryConfig{Exporter: "otlp-grpc", Endpoint: ln.Addr().String(), SampleRatio: 1,
		Headers: map[string]string{"x-api-key": "collector-key"}}, "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, s := Tracer().Start(context.Background(), "GET /api/v1/agents")
	s.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.names) != 1 || recv.names[0] != "GET /api/v1/agents" || len(recv.auth) == 0 || recv.auth[0] != "collector-key" {
		t.Fatalf("received %v, x-api-key %v", recv.names, recv.auth)
	}
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
}
