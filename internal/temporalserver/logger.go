package temporalserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// minLevelHandler drops records below min before they reach the wrapped
// handler, so Temporal's volume can be turned down without changing the
// gateway's own log level.
type minLevelHandler struct {
	inner slog.Handler
	min   slog.Leveler
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min.Level() && h.inner.Enabled(ctx, l)
}

func (h minLevelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.inner.Handle(ctx, r)
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{inner: h.inner.WithAttrs(attrs), min: h.min}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{inner: h.inner.WithGroup(name), min: h.min}
}

// quietLogger returns l limited to records at min or above.
func quietLogger(l *slog.Logger, min slog.Leveler) *slog.Logger {
	return slog.New(minLevelHandler{inner: l.Handler(), min: min})
}

// serverLogLevel is the threshold of Temporal's logs: the configured level
// while running, errors only once stopping, when every service warns about
// its peers going away (refused dials, failed polls) and that is expected.
type serverLogLevel struct {
	base     slog.Leveler
	stopping atomic.Bool
}

func (l *serverLogLevel) Level() slog.Level {
	if l.stopping.Load() {
		return max(l.base.Level(), slog.LevelError)
	}
	return l.base.Level()
}

// fatalError is what the server's Fatal log calls panic with: Temporal
// expects Fatal not to return (its default logger exits the process), and a
// gateway must not exit from inside a library. Start recovers it into an
// error when the call happens on its goroutine.
type fatalError struct {
	msg  string
	tags []tag.Tag
}

func (e *fatalError) Error() string {
	s := "temporal: " + e.msg
	for _, t := range e.tags {
		s += fmt.Sprintf(" %s=%v", t.Key(), t.Value())
	}
	return s
}

// slogLogger adapts slog to Temporal's logger interface.
type slogLogger struct {
	l *slog.Logger
}

var (
	_ log.Logger     = slogLogger{}
	_ log.WithLogger = slogLogger{}
)

func newTemporalLogger(l *slog.Logger) slogLogger {
	return slogLogger{l: l}
}

func (s slogLogger) Debug(msg string, tags ...tag.Tag) { s.log(slog.LevelDebug, msg, tags) }
func (s slogLogger) Info(msg string, tags ...tag.Tag)  { s.log(slog.LevelInfo, msg, tags) }
func (s slogLogger) Warn(msg string, tags ...tag.Tag)  { s.log(slog.LevelWarn, msg, tags) }
func (s slogLogger) Error(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// DPanic panics only in Temporal's development mode; we are never in it.
func (s slogLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

func (s slogLogger) Panic(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(&fatalError{msg: msg, tags: tags})
}

func (s slogLogger) Fatal(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(&fatalError{msg: msg, tags: tags})
}

func (s slogLogger) With(tags ...tag.Tag) log.Logger {
	return slogLogger{l: s.l.With(attrsOf(tags)...)}
}

func (s slogLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return // skip building attributes for dropped records
	}
	s.l.Log(ctx, level, msg, attrsOf(tags)...)
}

func attrsOf(tags []tag.Tag) []any {
	attrs := make([]any, 0, len(tags))
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	return attrs
}
