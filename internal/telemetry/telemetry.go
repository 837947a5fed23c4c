// Package telemetry is what lets an operator see inside the gateway:
// OpenTelemetry tracing (export, sampling, propagation), the Prometheus
// metrics the gateway exposes on GET /metrics, and the helpers the
// instrumented packages use to record both. docs/observability.md lists
// every span and metric.
//
// Tracing uses the OpenTelemetry global tracer provider and propagator:
// instrumented packages (internal/llm, the Temporal interceptor, otelhttp)
// take their tracer from it, as the OpenTelemetry convention for libraries
// asks. Setup installs the provider once at start-up; with the exporter
// "none" nothing is installed and every span is a free no-op.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentryhq/agentry/internal/config"
)

// InstrumentationName names the tracer of the gateway's own spans.
const InstrumentationName = "github.com/agentryhq/agentry"

// defaultProvider is the global tracer provider as the process starts: a
// delegate whose spans record nothing until a provider is installed.
var defaultProvider = otel.GetTracerProvider()

// Tracer is the gateway's tracer: the global provider's once one is
// installed (Setup, or a test's), so a provider installed later is still
// used. Until then it is a no-op tracer, whose spans carry the caller's
// trace context as the delegate's do, for less: the delegate looked its
// tracer up under a lock and allocated every span, and a chat request
// starts three (about 7 of its 190 allocations).
func Tracer() trace.Tracer { return tracerOf(otel.GetTracerProvider()) }

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp != defaultProvider {
		return tp.Tracer(InstrumentationName)
	}
	return noop.Tracer{}
}

// Tracing is the installed tracing pipeline; Shutdown flushes it.
type Tracing struct {
	provider *sdktrace.TracerProvider
	queue    *boundedProcessor
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Shutdown exports what is queued (bounded by ctx) and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// captureContent is telemetry.capture_content: prompts and tool arguments
// on spans. Set by Setup before the gateway serves (atomic: a test binary
// starts several gateways while others serve).
var captureContent atomic.Bool

// CaptureContent reports whether spans may carry prompt, reply and tool
// content (telemetry.capture_content). Off by default.
func CaptureContent() bool { return captureContent.Load() }

// Setup installs tracing as the telemetry section asks. It never dials the
// exporter's endpoint: an unreachable collector shows up later as dropped
// spans (agentry_telemetry_spans_dropped_total) and one warning, never as a
// failed start or a slow request. An unknown exporter is an error naming
// the key.
func Setup(ctx context.Context, cfg config.TelemetryConfig, version string, log *slog.Logger) (*Tracing, error) {
	if log == nil {
		log = slog.Default()
	}
	captureContent.Store(cfg.CaptureContent)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	exp, err := newExporter(ctx, cfg)
	if err != nil || exp == nil {
		return &Tracing{}, err
	}
	name := cfg.ServiceName
	if name == "" {
		name = "agentry"
	}
	res := resource.NewWithAttributes("", attribute.String("service.name", name), attribute.String("service.version", version))
	ratio := cfg.SampleRatio
	queue := newBoundedProcessor(scrubExporter{exp}, DefaultQueueSize, log)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithSpanProcessor(queue),
	)
	otel.SetTracerProvider(tp)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Debug("opentelemetry", "err", err) }))
	log.Info("tracing enabled", "exporter", cfg.Exporter, "endpoint", endpoint(cfg), "service_name", name, "sample_ratio", ratio)
	return &Tracing{provider: tp, queue: queue}, nil
}

// exportTimeout bounds one export, so a black-holed collector holds the
// export goroutine (never a request) for at most this long per batch.
const exportTimeout = 5 * time.Second

func newExporter(ctx context.Context, cfg config.TelemetryConfig) (sdktrace.SpanExporter, error) {
	ep := endpoint(cfg)
	switch cfg.Exporter {
	case "", "none":
		return nil, nil
	case "stdout":
		return stdouttrace.New()
	case "otlp", "otlp-http":
		opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(exportTimeout), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}
		if ep != "" {
			u, err := endpointURL(ep, "/v1/traces")
			if err != nil {
				return nil, err
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		return otlptracehttp.New(ctx, opts...)
	case "otlp-grpc":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithTimeout(exportTimeout), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if ep != "" {
			u, err := endpointURL(ep, "")
			if err != nil {
				return nil, err
			}
			opts = append(opts, otlptracegrpc.WithEndpointURL(u))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	return nil, fmt.Errorf("telemetry.exporter: unknown exporter %q (use otlp, otlp-grpc, stdout or none)", cfg.Exporter)
}

func endpoint(cfg config.TelemetryConfig) string {
	if cfg.Endpoint != "" {
		return cfg.Endpoint
	}
	return cfg.OTLPEndpoint
}

// endpointURL accepts a URL or a bare host:port (taken as plain HTTP, the
// way a collector on the same host is usually reached). A URL without a
// path gets defaultPath, so the collector's base address
// (http://collector:4318, as in OTEL_EXPORTER_OTLP_ENDPOINT) works.
func endpointURL(ep, defaultPath string) (string, error) {
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("telemetry.endpoint: %q is not an http(s) URL or host:port", ep)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = defaultPath
	}
	return u.String(), nil
}

// TraceID is the trace id of ctx's span, or "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}
