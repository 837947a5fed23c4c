// Package telemetrytest records the spans a test makes and switches
// telemetry.capture_content, for the tests of instrumented packages.
package telemetrytest

import (
	"context"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/telemetry"
)

// Record installs a global tracer provider that keeps every ended span
// until the test ends (then a fresh provider and capture off are put
// back). Tests using it must not run in parallel with other span tests.
func Record(t testing.TB) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() {
		otel.SetTracerProvider(sdktrace.NewTracerProvider())
		CaptureContent(t, false)
	})
	return rec
}

// CaptureContent sets telemetry.capture_content as a gateway start would.
func CaptureContent(t testing.TB, on bool) {
	t.Helper()
	if _, err := telemetry.Setup(context.Background(), config.TelemetryConfig{Exporter: "none", CaptureContent: on}, "test", slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
}

// Attrs is a span's attributes as key -> emitted value.
func Attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, a := range s.Attributes() {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}
