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
	// One batch repeats the same texts many times (route templates, span
	// names, models): each distinct text is scrubbed once per batch.
	sc := scrubber{}
	clean := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		clean[i] = scrubbedSpan{ReadOnlySpan: s, sc: sc}
	}
	return e.next.ExportSpans(ctx, clean)
}

func (e scrubExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

// scrubbedSpan is a finished span as an exporter reads it, with secrets
// removed from its text. Embedding the interface keeps every other
// accessor (ids, times, resource) as recorded.
type scrubbedSpan struct {
	sdktrace.ReadOnlySpan
	sc scrubber
}

func (s scrubbedSpan) Name() string { return s.sc.text(s.ReadOnlySpan.Name()) }

func (s scrubbedSpan) Attributes() []attribute.KeyValue {
	return s.sc.attrs(s.ReadOnlySpan.Attributes())
}

func (s scrubbedSpan) Status() sdktrace.Status {
	st := s.ReadOnlySpan.Status()
	st.Description = s.sc.text(st.Description)
	return st
}

func (s scrubbedSpan) Events() []sdktrace.Event {
	events := s.ReadOnlySpan.Events()
	if len(events) == 0 {
		return events
	}
	out := make([]sdktrace.Event, len(events))
	for i, ev := range events {
		ev.Name = s.sc.text(ev.Name)
		ev.Attributes = s.sc.attrs(ev.Attributes)
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
		l.Attributes = s.sc.attrs(l.Attributes)
		out[i] = l
	}
	return out
}

// scrubber scrubs the texts of one export batch, remembering each result
// (an exporter reads its batch from one goroutine).
type scrubber map[string]string

// text is scrub.String(t). Texts shorter than the shortest secret the
// scrubber removes (scrub.MinSecretLen; no credential pattern matches
// less) are returned as they are.
func (sc scrubber) text(t string) string {
	if len(t) < scrub.MinSecretLen {
		return t
	}
	if clean, ok := sc[t]; ok {
		return clean
	}
	clean := scrub.String(t)
	sc[t] = clean
	return clean
}

// attrs returns attrs with every string and string-slice value scrubbed
// (a copy; the recorded span is not modified).
func (sc scrubber) attrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	if len(attrs) == 0 {
		return attrs
	}
	out := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		switch a.Value.Type() {
		case attribute.STRING:
			a = a.Key.String(sc.text(a.Value.AsString()))
		case attribute.STRINGSLICE:
			vs := a.Value.AsStringSlice()
			for j := range vs {
				vs[j] = sc.text(vs[j])
			}
			a = a.Key.StringSlice(vs)
		}
		out[i] = a
	}
	return out
}
