package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Queue bounds of the span export.
const (
	// DefaultQueueSize is how many finished spans wait for export at most;
	// spans beyond it are dropped (and counted), never waited for.
	DefaultQueueSize = 4096
	// batchSize is how many spans one export carries at most.
	batchSize = 512
	// batchDelay is how long a partial batch waits for more spans.
	batchDelay = 2 * time.Second
)

// boundedProcessor is a batching span processor whose only contact with
// the request path is a non-blocking channel send in OnEnd. The SDK's
// BatchSpanProcessor drops silently when full; this one counts every span
// it loses (queue full, or an export that failed) in
// agentry_telemetry_spans_dropped_total and warns once per outage, so an
// unreachable collector is visible without slowing or failing requests.
type boundedProcessor struct {
	exp   sdktrace.SpanExporter
	log   *slog.Logger
	queue chan sdktrace.ReadOnlySpan
	flush chan chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// failing is set while exports fail, so the warning is logged once.
	failing atomic.Bool
}

func newBoundedProcessor(exp sdktrace.SpanExporter, size int, log *slog.Logger) *boundedProcessor {
	p := &boundedProcessor{exp: exp, log: log, queue: make(chan sdktrace.ReadOnlySpan, size),
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *boundedProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case p.queue <- s:
	default:
		dropped(1, "queue_full")
	}
}

func (p *boundedProcessor) run() {
	defer close(p.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, batchSize)
	timer := time.NewTimer(batchDelay)
	defer timer.Stop()
	export := func() {
		if len(batch) == 0 {
			return
		}
		p.export(batch)
		batch = batch[:0]
	}
	for {
		select {
		case s := <-p.queue:
			batch = append(batch, s)
			if len(batch) >= batchSize {
				export()
			}
		case <-timer.C:
			export()
			timer.Reset(batchDelay)
		case ack := <-p.flush:
			p.drain(&batch, export)
			close(ack)
		case <-p.stop:
			p.drain(&batch, export)
			return
		}
	}
}

// drain exports everything queued now.
func (p *boundedProcessor) drain(batch *[]sdktrace.ReadOnlySpan, export func()) {
	for {
		select {
		case s := <-p.queue:
			*batch = append(*batch, s)
			if len(*batch) >= batchSize {
				export()
			}
		default:
			export()
			return
		}
	}
}

func (p *boundedProcessor) export(batch []sdktrace.ReadOnlySpan) {
	ctx, cancel := context.WithTimeout(context.Background(), exportTimeout+time.Second)
	defer cancel()
	if err := p.exp.ExportSpans(ctx, batch); err != nil {
		dropped(len(batch), "export_failed")
		if !p.failing.Swap(true) {
			p.log.Warn("tracing: exporting spans failed; spans are dropped until the collector answers (counted in agentry_telemetry_spans_dropped_total)",
				"spans", len(batch), "err", err)
		}
		return
	}
	if p.failing.Swap(false) {
		p.log.Info("tracing: exporting spans works again")
	}
}

func (p *boundedProcessor) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case p.flush <- ack:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *boundedProcessor) Shutdown(ctx context.Context) error {
	p.once.Do(func() { close(p.stop) })
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.exp.Shutdown(ctx)
}
