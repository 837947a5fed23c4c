package delivery

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/signature"
	"github.com/agentryhq/agentry/internal/telemetry"
	"github.com/agentryhq/agentry/workflows"
)

// Target is where and how one message is sent, resolved at attempt time
// (so a secret never enters workflow history).
type Target struct {
	URL     string
	Method  string
	Headers []HeaderLine
	// Secret signs the body; empty sends it unsigned.
	Secret string
}

// Result is the outcome of one HTTP attempt.
type Result struct {
	StatusCode int
	Duration   time.Duration
	// Err is nil on a 2xx answer.
	Err error
	// Retryable: 5xx, 429 and network errors are worth another attempt;
	// other 4xx answers and refused destinations are not.
	Retryable bool
	// RetryAfter is the receiver's Retry-After (429/503), if any.
	RetryAfter time.Duration
}

// Sender makes the HTTP attempts. Every connection, redirects included,
// passes the SSRF policy at dial time.
type Sender struct {
	client *http.Client
	// Now is the clock used for timestamps (tests pin it).
	Now func() time.Time
	// UserAgent is sent with every request.
	UserAgent string
}

// NewSender builds a sender whose attempts time out after timeout.
func NewSender(p netguard.Policy, timeout time.Duration) *Sender {
	if timeout <= 0 {
		timeout = workflows.DefaultDeliveryAttemptTimeout
	}
	c := p.Client(timeout)
	// A redirect would be re-sent without its signature headers' meaning
	// (and possibly to another party): do not follow, treat 3xx as failure.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Sender{client: c, Now: time.Now, UserAgent: "Agentry-Webhook/1"}
}

// maxErrorBody bounds how much of an error answer is read (and quoted).
const maxErrorBody = 512

// Send makes one attempt of a delivery: the configured headers first, then
// Content-Type (unless configured), X-Agentry-Delivery and, with a secret,
// the timestamp and signature, so configured lines never replace them.
func (s *Sender) Send(ctx context.Context, t Target, deliveryID string, body []byte) Result {
	ctx, span := telemetry.Tracer().Start(ctx, "delivery attempt", trace.WithSpanKind(trace.SpanKindClient))
	res := s.send(ctx, t, deliveryID, body)
	outcome := "ok"
	switch {
	case res.Err != nil && res.StatusCode > 0:
		outcome = "http_error"
	case res.Err != nil:
		outcome = "network_error"
	}
	telemetry.DeliveryAttempted(outcome)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("agentry.delivery.id", deliveryID), attribute.String("agentry.delivery.outcome", outcome),
			attribute.String("server.address", DisplayURL(t.URL)))
		if res.StatusCode > 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", res.StatusCode))
		}
		if res.Err != nil {
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.End()
	return res
}

func (s *Sender) send(ctx context.Context, t Target, deliveryID string, body []byte) Result {
	method := strings.ToUpper(strings.TrimSpace(t.Method))
	if method == "" {
		method = http.MethodPost
	}
	// The body leaves the gateway (and is signed): no configured secret or
	// credential-shaped string goes with it, whoever wrote it.
	body = scrub.JSON(body)
	req, err := http.NewRequestWithContext(ctx, method, t.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Err: fmt.Errorf("build request: %w", err)}
	}
	Apply(req.Header, t.Headers)
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", s.UserAgent)
	}
	req.Header.Set(signature.HeaderDelivery, deliveryID)
	signature.SetSignature(req.Header, t.Secret, s.Now(), body)

	start := time.Now()
	resp, err := s.client.Do(req)
	res := Result{Duration: time.Since(start)}
	if err != nil {
		res.Err = scrub.Error(fmt.Errorf("send to %s: %w", DisplayURL(t.URL), unwrapURLError(err)))
		// Network errors and timeouts retry; a refused destination will
		// be refused again.
		res.Retryable = !IsBlocked(err)
		return res
	}
	defer resp.Body.Close()
	res.StatusCode = resp.StatusCode
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return res
	}
	// The receiver's answer is outside text: it may echo our headers.
	res.Err = fmt.Errorf("%s answered %d %s%s", DisplayURL(t.URL), resp.StatusCode, http.StatusText(resp.StatusCode), scrub.String(quote(snippet)))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		res.Retryable = true
		res.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), s.Now())
	default:
		res.Retryable = false
	}
	return res
}

func quote(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return ": " + s
}

// unwrapURLError drops net/url's `Post "http://...?token=...": ` prefix,
// which would repeat the URL with its query.
func unwrapURLError(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && strings.Contains(err.Error(), "\"") {
		if inner := u.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// retryAfter parses Retry-After (seconds or an HTTP date).
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
