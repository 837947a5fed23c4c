package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentryhq/agentry/internal/scrub"
)

// scrubExporter passes every span through internal/scrub before it leaves
// the process: the span name, every string attribute (the gateway's own and
// those of libraries such as otelhttp's url.full, which may carry a key in
// a query string), event attributes (a recorded error's text), link
// attributes and the status description. It runs in the export goroutine,
// never on the request path, and only on spans that are exported.
type scrubExporter struct{ next sdktrace.SpanExporter }

func (e scrubExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	clean := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		clean[i] = scrubbedSpan{s}
	}
	return e.next.ExportSpans(ctx, clean)
}

func (e scrubExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

// scrubbedSpan is a finished span as an exporter reads it, with secrets
// removed from its text. Embedding the interface keeps every other
// accessor (ids, times, resource) as recorded.
type scrubbedSpan struct{ sdktrace.ReadOnlySpan }

func (s scrubbedSpan) Name() string { return scrub.String(s.ReadOnlySpan.Name()) }

func (s scrubbedSpan) Attributes() []attribute.KeyValue {
	return scrubAttrs(s.ReadOnlySpan.Attributes())
}

func (s scrubbedSpan) Status() sdktrace.Status {
	st := s.ReadOnlySpan.Status()
	st.Description = scrub.String(st.Description)
	return st
}

func (s scrubbedSpan) Events() []sdktrace.Event {
	events := s.ReadOnlySpan.Events()
	if len(events) == 0 {
		return events
	}
	out := make([]sdktrace.Event, len(events))
	for i, ev := range events {
		ev.Name = scrub.String(ev.Name)
		ev.Attributes = scrubAttrs(ev.Attributes)
		out[i] = ev
	}
	return out
}

func (s scrubbedSpan) Links() []sdktrace.Link {
	links := s.ReadOnlySpan.Links()
	if len(links) == 0 {
		return links
	}
	out := make([]sdktrace.Link, len(links))
	for i, l := range links {
		l.Attributes = scrubAttrs(l.Attributes)
		out[i] = l
	}
	return out
}

// scrubAttrs returns attrs with every string and string-slice value
// scrubbed (a copy; the recorded span is not modified).
func scrubAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	if len(attrs) == 0 {
		return attrs
	}
	out := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		switch a.Value.Type() {
		case attribute.STRING:
			a = a.Key.String(scrub.String(a.Value.AsString()))
		case attribute.STRINGSLICE:
			vs := a.Value.AsStringSlice()
			for j := range vs {
				vs[j] = scrub.String(vs[j])
			}
			a = a.Key.StringSlice(vs)
		}
		out[i] = a
	}
	return out
}
