package telemetry

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Without an installed provider the gateway's spans record nothing but
// carry the caller's trace context (a traceparent the client sent still
// names the trace); with one they are recorded.
func TestTracerWithoutAProviderKeepsTheTraceContext(t *testing.T) {
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)

	_, span := tracerOf(defaultProvider).Start(ctx, "request")
	if span.IsRecording() || span.SpanContext().TraceID() != parent.TraceID() {
		t.Fatalf("without a provider: recording %v, trace %s (want %s)", span.IsRecording(), span.SpanContext().TraceID(), parent.TraceID())
	}
	span.End()
	if _, span := tracerOf(defaultProvider).Start(context.Background(), "request"); span.IsRecording() || span.SpanContext().HasTraceID() {
		t.Fatal("without a provider and a parent, a span got a trace")
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	_, span = tracerOf(tp).Start(ctx, "request")
	span.End()
	if got := rec.Ended(); len(got) != 1 || got[0].SpanContext().TraceID() != parent.TraceID() || got[0].Name() != "request" {
		t.Fatalf("with a provider: %d spans recorded", len(got))
	}
}
