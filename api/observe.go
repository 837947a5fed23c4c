package api

import (
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentryhq/agentry/internal/audit"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/telemetry"
)

// headerTraceID carries the request's trace id back to the caller, so it
// can be handed to an operator (error envelopes carry it as trace_id).
const headerTraceID = "X-Trace-ID"

// serverSpan is made once (an option is an interface value: each call of
// trace.WithSpanKind allocates).
var serverSpan = trace.WithSpanKind(trace.SpanKindServer)

// observe is the outermost middleware after the request id: a server span
// per request (named by the route template, continuing a caller's
// traceparent), the HTTP metrics, and the audit line. The error envelope
// is rendered inside (requestLog), so the status seen here is the one sent.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	ctx := otel.GetTextMapPropagator().Extract(c.UserContext(), fiberCarrier{c})
	ctx, span := telemetry.Tracer().Start(ctx, methodName(c.Method()), serverSpan)
	c.SetUserContext(ctx)
	if sc := span.SpanContext(); sc.HasTraceID() {
		c.Set(headerTraceID, sc.TraceID().String())
	}
	err := c.Next()
	status := c.Response().StatusCode()
	route := routeTemplate(c)
	method := methodName(c.Method())
	telemetry.ObserveHTTP(route, method, status, time.Since(start))
	if span.IsRecording() {
		// Fiber's strings point into buffers it reuses: copy what outlives the request.
		span.SetName(method + " " + route)
		span.SetAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route),
			attribute.Int("http.response.status_code", status), attribute.String("url.path", strings.Clone(c.Path())))
		if rid, ok := c.Locals("request_id").(string); ok {
			span.SetAttributes(attribute.String("agentry.request_id", strings.Clone(rid)))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
	}
	span.End()
	s.auditRequest(c, route, status)
	return err
}

// routeTemplate is the matched route's path template (/api/v1/tasks/:id),
// which keeps metric labels and span names few. A request that matched no
// route is "unmatched".
func routeTemplate(c *fiber.Ctx) string {
	r := c.Route()
	if r == nil || len(r.Handlers) == 0 { // Fiber's stand-in when nothing matched
		return "unmatched"
	}
	return r.Path
}

// methodName is the request method as a string that stays valid after the
// request (Fiber's c.Method() is backed by a reused buffer). Metric labels
// keep it, and unknown methods share one label.
func methodName(m string) string {
	if known, ok := methods[m]; ok {
		return known
	}
	return "OTHER"
}

var methods = map[string]string{}

func init() {
	for _, m := range []string{fiber.MethodGet, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete,
		fiber.MethodHead, fiber.MethodOptions} {
		methods[m] = m
	}
}

// fiberCarrier reads propagation headers from a Fiber request.
type fiberCarrier struct{ c *fiber.Ctx }

func (f fiberCarrier) Get(key string) string { return strings.Clone(f.c.Get(key)) }
func (f fiberCarrier) Set(string, string)    {}
func (f fiberCarrier) Keys() []string        { return []string{"traceparent", "tracestate", "baggage"} }

var _ propagation.TextMapCarrier = fiberCarrier{}

// auditRequest writes the audit line of a mutating call, or of any call
// refused for missing credentials or permission (a decision).
func (s *Server) auditRequest(c *fiber.Ctx, route string, status int) {
	if s.deps.Audit == nil {
		return
	}
	mutating := false
	switch c.Method() {
	case fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete:
		mutating = true
	}
	denied := status == fiber.StatusUnauthorized || status == fiber.StatusForbidden
	if !mutating && !denied {
		return
	}
	e := audit.Entry{Kind: audit.KindAPI, Method: c.Method(), Route: route, Status: status, Outcome: "ok",
		TraceID: telemetry.TraceID(c.UserContext()), RemoteIP: c.IP()}
	if rid, ok := c.Locals("request_id").(string); ok {
		e.RequestID = rid
	}
	if p := Principal(c); p != nil {
		e.Subject, e.Role = p.Subject, p.Role
	}
	if params := c.AllParams(); len(params) > 0 {
		e.Targets = params
	}
	switch {
	case denied:
		e.Kind, e.Outcome = audit.KindDecision, "denied"
	case status == fiber.StatusTooManyRequests || status == fiber.StatusPaymentRequired || status == fiber.StatusConflict:
		e.Outcome = "rejected"
	case status >= 400:
		e.Outcome = "error"
	}
	if code, ok := c.Locals(localErrorCode).(string); ok {
		e.Reason = code
	}
	s.deps.Audit.Write(e)
}

// localErrorCode is where the error handler leaves the envelope's code for
// the audit line.
const localErrorCode = "error_code"

// metrics serves GET /metrics: the Prometheus text format of every metric
// the gateway keeps (docs/observability.md).
var metricsHandler = adaptor.HTTPHandler(telemetry.Handler())

// registerMetrics adds GET /metrics on the main listener: behind the API
// key unless telemetry.metrics.public, absent when telemetry.metrics.enabled
// is false.
func (s *Server) registerMetrics() {
	c := s.deps.Config
	if c != nil && !c.Telemetry.Metrics.Enabled {
		return
	}
	if c != nil && c.Telemetry.Metrics.Public {
		s.app.Get("/metrics", metricsHandler)
		return
	}
	s.app.Get("/metrics", s.authenticate, metricsHandler)
}

// auditTail serves GET /logs/audit?lines=N (admin): the last lines of the
// audit log, each one JSON object as written.
func (s *Server) auditTail(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	if s.deps.Audit == nil {
		return (&Error{Status: fiber.StatusNotFound, Message: "the audit log is off; enable runtime.audit_log.enabled", Code: "audit_log_disabled"})
	}
	n, err := queryInt(c, "lines", 200, 1, 100000)
	if err != nil {
		return err
	}
	lines, err := s.deps.Audit.Tail(n)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"lines": lines})
}
