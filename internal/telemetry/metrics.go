package telemetry

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The gateway's metrics live in one registry of this package (not the
// Prometheus default registry, so nothing a dependency registers leaks into
// GET /metrics). They are process-wide like the process they describe:
// counters only go up, and a test reads a counter before and after.
var registry = prometheus.NewRegistry()

// Registry is the registry GET /metrics serves; collectors of other parts
// (the Temporal SDK's metrics, the cost gauges) register on it.
func Registry() *prometheus.Registry { return registry }

// Handler serves the registry in the Prometheus text format.
func Handler() http.Handler {
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

var (
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_http_requests_total",
		Help: "HTTP requests answered, by route template, method and status code.",
	}, []string{"route", "method", "status"})
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentry_http_request_duration_seconds",
		Help:    "Time from request to the end of the response (streams: the whole stream), by route template and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"route", "method"})
	llmCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_llm_calls_total",
		Help: "LLM calls by provider id, model and outcome (ok, error, rejected).",
	}, []string{"provider", "model", "outcome"})
	llmTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_llm_tokens_total",
		Help: "Tokens of settled LLM calls by provider id, model and type (input, output).",
	}, []string{"provider", "model", "type"})
	llmCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_llm_cost_usd_total",
		Help: "Cost of settled LLM calls in USD (the ledger's figure), by provider id and model.",
	}, []string{"provider", "model"})
	llmDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentry_llm_call_duration_seconds",
		Help:    "Duration of admitted LLM calls (provider time including retries), by provider id and model.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"provider", "model"})
	admissionRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_admission_rejections_total",
		Help: "LLM calls refused by cost admission, by reason (the error code: budget_exceeded, rate_limited, circuit_open, ...).",
	}, []string{"reason"})
	runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_runs_total",
		Help: "Task runs by status: started, finished, failed, cancelled.",
	}, []string{"status"})
	deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_deliveries_total",
		Help: "Outbound deliveries that ended, by outcome (delivered, failed).",
	}, []string{"outcome"})
	deliveryAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_delivery_attempts_total",
		Help: "Outbound delivery HTTP attempts, by outcome (ok, http_error, network_error).",
	}, []string{"outcome"})
	toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_tool_calls_total",
		Help: "Tool calls run for agents, by tool and outcome (ok, error).",
	}, []string{"tool", "outcome"})
	spansDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentry_telemetry_spans_dropped_total",
		Help: "Finished spans that were not exported, by reason (queue_full, export_failed).",
	}, []string{"reason"})
	auditWriteErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentry_audit_write_errors_total",
		Help: "Audit log lines that could not be written.",
	})
)

func init() {
	registry.MustRegister(httpRequests, httpDuration, llmCalls, llmTokens, llmCost, llmDuration, admissionRejections,
		runs, deliveries, deliveryAttempts, toolCalls, spansDropped, auditWriteErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Present from the first scrape, so rate() and alerts see a zero.
	for _, r := range []string{"queue_full", "export_failed"} {
		spansDropped.WithLabelValues(r)
	}
}

// ObserveHTTP records one answered request.
func ObserveHTTP(route, method string, status int, d time.Duration) {
	s := cachedSeries(&httpSeriesOf, httpKey{route, method, status}, func(k httpKey) *httpSeries {
		return &httpSeries{
			requests: httpRequests.WithLabelValues(k.route, k.method, strconv.Itoa(k.status)),
			duration: httpDuration.WithLabelValues(k.route, k.method),
		}
	})
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
}

// The series a request or an LLM call records, looked up by their labels
// once: WithLabelValues hashes and checks every label value on every call,
// and a chat request made seven such lookups (metrics are only added to,
// never deleted, so a series found stays the one the vector holds).
type (
	httpKey struct {
		route, method string
		status        int
	}
	httpSeries struct {
		requests prometheus.Counter
		duration prometheus.Observer
	}
	llmKey    struct{ provider, model, outcome string }
	llmSeries struct {
		calls, input, output, cost prometheus.Counter
		duration                   prometheus.Observer
	}
)

var httpSeriesOf, llmSeriesOf sync.Map

// cachedSeries returns the series of key in cache, made by newSeries the first
// time.
func cachedSeries[K comparable, S any](cache *sync.Map, key K, newSeries func(K) *S) *S {
	if s, ok := cache.Load(key); ok {
		return s.(*S)
	}
	s, _ := cache.LoadOrStore(key, newSeries(key))
	return s.(*S)
}

// RunStatus counts a run status change (started or a final status).
func RunStatus(status string) { runs.WithLabelValues(status).Inc() }

// DeliveryEnded counts a delivery that ended with outcome.
func DeliveryEnded(outcome string) { deliveries.WithLabelValues(outcome).Inc() }

// DeliveryAttempted counts one delivery HTTP attempt.
func DeliveryAttempted(outcome string) { deliveryAttempts.WithLabelValues(outcome).Inc() }

// ToolCalled counts one tool call.
func ToolCalled(tool, outcome string) { toolCalls.WithLabelValues(tool, outcome).Inc() }

// AuditWriteFailed counts an audit line that was lost.
func AuditWriteFailed() { auditWriteErrors.Inc() }

func dropped(n int, reason string) { spansDropped.WithLabelValues(reason).Add(float64(n)) }

// LLMCallRejected counts a call refused by cost admission.
func LLMCallRejected(provider, model, reason string) {
	llmCalls.WithLabelValues(provider, model, "rejected").Inc()
	admissionRejections.WithLabelValues(reason).Inc()
}

// LLMCallSettled counts an admitted call once the ledger has settled it:
// its outcome (ok or error), the tokens and cost it was charged and how
// long the provider took.
func LLMCallSettled(provider, model, outcome string, inputTokens, outputTokens, costMicros int64, d time.Duration) {
	s := cachedSeries(&llmSeriesOf, llmKey{provider, model, outcome}, func(k llmKey) *llmSeries {
		return &llmSeries{
			calls:    llmCalls.WithLabelValues(k.provider, k.model, k.outcome),
			input:    llmTokens.WithLabelValues(k.provider, k.model, "input"),
			output:   llmTokens.WithLabelValues(k.provider, k.model, "output"),
			cost:     llmCost.WithLabelValues(k.provider, k.model),
			duration: llmDuration.WithLabelValues(k.provider, k.model),
		}
	})
	s.calls.Inc()
	s.input.Add(float64(inputTokens))
	s.output.Add(float64(outputTokens))
	s.cost.Add(float64(costMicros) / 1e6)
	s.duration.Observe(d.Seconds())
}
