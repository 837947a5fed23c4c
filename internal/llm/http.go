package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentryhq/agentry/internal/inlinehttp"
	"github.com/agentryhq/agentry/internal/scrub"

	"github.com/agentryhq/agentry/internal/textcut"
)

// maxErrorBody bounds how much of an error body is read and quoted.
const maxErrorBody = 4 << 10

// maxLine bounds one SSE or NDJSON line (a whole tool-call argument object may arrive in one).
const maxLine = 16 << 20

// maxResponseBody bounds a non-streaming answer, read whole (decodeJSON):
// twice the largest streamed line.
const maxResponseBody = 2 * maxLine

// httpBase is what the three clients share: identity, address, credentials and the HTTP client.
type httpBase struct {
	id      string
	typ     string
	base    string
	apiKey  string
	headers map[string]string
	timeout time.Duration
	client  *http.Client

	// header is what every request starts with (requestHeader).
	headerOnce sync.Once
	header     http.Header

	hostOnce sync.Once
	host     string // hostname
}

// requestHeader returns a copy of the headers every request to the
// provider carries: the JSON ones, the configured extra ones (which win)
// and what setAuth adds (the provider's credentials and version, the same
// for every request of a client). Cloning the finished set is about half
// the cost of setting each header on every request.
func (h *httpBase) requestHeader(setAuth func(http.Header)) http.Header {
	h.headerOnce.Do(func() {
		hd := make(http.Header, 5+len(h.headers))
		hd.Set("Content-Type", "application/json")
		hd.Set("Accept", "application/json, text/event-stream, application/x-ndjson")
		hd.Set("User-Agent", "agentry")
		for k, v := range h.headers {
			hd.Set(k, v)
		}
		if setAuth != nil {
			setAuth(hd)
		}
		h.header = hd
	})
	return h.header.Clone()
}

// hostname is the host name of the provider's base URL ("" if it does not
// parse), worked out once.
func (h *httpBase) hostname() string {
	h.hostOnce.Do(func() {
		if u, err := url.Parse(h.base); err == nil {
			h.host = u.Hostname()
		}
	})
	return h.host
}

func newHTTPBase(id, typ, base string, cfg ProviderConfig) *httpBase {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	headers := make(map[string]string, len(cfg.Headers))
	for k, v := range cfg.Headers {
		headers[k] = v
	}
	return &httpBase{
		id: id, typ: typ, base: base, apiKey: cfg.APIKey, headers: headers, timeout: timeout,
		// otelhttp makes the provider request a child span of the LLM call
		// and sends the trace context (traceparent) along. Without a trace
		// (tracing off) the request goes straight to the transport: otelhttp
		// would clone it and compute HTTP metric attributes for a meter
		// nobody reads. Under it, inlinehttp sends the request and reads the
		// answer on the calling goroutine (docs/decisions.md, "Provider HTTP
		// client"); requests through a proxy go to newTransport's net/http.
		client: &http.Client{Transport: otelhttp.NewTransport(inlinehttp.New(newTransport()), otelhttp.WithFilter(inTrace))},
	}
}

// inTrace reports whether r belongs to a trace whose context is worth
// sending on (sampled or not, so the provider's own tracing follows our
// sampling decision).
func inTrace(r *http.Request) bool {
	return trace.SpanContextFromContext(r.Context()).IsValid()
}

// newTransport keeps many idle connections per host: the gateway sends many concurrent calls to few
// hosts, and the default of 2 idle connections per host would reopen a connection on most calls.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

func (h *httpBase) ID() string      { return h.id }
func (h *httpBase) Kind() string    { return h.typ }
func (h *httpBase) Address() string { return h.base }

// post sends body as JSON to path and returns the response when its status is 2xx; otherwise the
// body is read into a ProviderError. setAuth adds the provider's credentials and version headers
// (once per client: see requestHeader).
func (h *httpBase) post(ctx context.Context, path string, body any, setAuth func(http.Header)) (*http.Response, error) {
	// goccy/go-json writes what encoding/json writes, in about half the
	// time (TestEncodeRequestAgreesWithEncodingJSON).
	buf, err := gojson.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("llm provider %q: encode request: %w", h.id, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(buf))
	if err != nil {
		return nil, fmt.Errorf("llm provider %q: build request: %w", h.id, err)
	}
	req.Header = h.requestHeader(setAuth)
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.transportError(ctx, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, h.statusError(resp)
}

// statusError reads an error response into a ProviderError, quoting the provider's own message.
func (h *httpBase) statusError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	typ, msg := parseErrorBody(raw)
	// Providers may quote the request (our API key included) in their error.
	typ, msg = scrub.String(typ), scrub.String(msg)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	wait, _ := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return &ProviderError{
		Provider: h.id, Address: h.base, StatusCode: resp.StatusCode, Type: typ, Message: msg,
		Retryable: retryableStatus(resp.StatusCode), RetryAfter: wait,
	}
}

// parseErrorBody understands the error bodies of the three wire formats:
// OpenAI {"error":{"message","type"}}, Anthropic {"type":"error","error":{"type","message"}},
// Ollama {"error":"..."}; anything else is quoted as text.
func parseErrorBody(raw []byte) (typ, msg string) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &env) == nil {
		if len(env.Error) > 0 {
			var s string
			if json.Unmarshal(env.Error, &s) == nil {
				return "", s
			}
			var obj struct {
				Type    string `json:"type"`
				Message string `json:"message"`
				Code    any    `json:"code"`
			}
			if json.Unmarshal(env.Error, &obj) == nil && obj.Message != "" {
				return obj.Type, obj.Message
			}
		}
		if env.Message != "" {
			return "", env.Message
		}
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 512 {
		text = textcut.Prefix(text, 512) + "..."
	}
	return "", text
}

// ParseRetryAfter reads a Retry-After header value: delay seconds or an HTTP date (relative to
// now). A date in the past gives 0. ok is false when the header is absent or unreadable.
func ParseRetryAfter(v string, now time.Time) (wait time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Clamp before converting so a huge value cannot overflow time.Duration.
		if secs > 24*3600 {
			secs = 24 * 3600
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// requestID returns the provider's request id header, falling back to the response id.
func requestID(h http.Header, name, fallback string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	return fallback
}

// Causes of our own cancellations, told apart from the caller's via context.Cause.
var (
	errAttemptTimeout = errors.New("attempt timed out")
	errStreamIdle     = errors.New("stream idle")
)

// streamAttempt runs one streaming request: it posts body, then hands each line of the response to
// onLine until onLine reports the provider's final event. Nothing may go quiet for longer than the
// timeout (before the headers, between lines); a stream may last longer than that in total. Errors
// become ProviderErrors unless they come from the caller's context or callback.
func (h *httpBase) streamAttempt(ctx context.Context, path string, body any, setAuth func(http.Header),
	onHeader func(http.Header), onLine func(line []byte) (done bool, err error)) error {
	attemptCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(h.timeout, func() { cancel(errStreamIdle) })
	defer idle.Stop()

	resp, err := h.post(attemptCtx, path, body, setAuth)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if onHeader != nil {
		onHeader(resp.Header)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4<<10), maxLine)
	for sc.Scan() {
		idle.Reset(h.timeout)
		done, err := onLine(sc.Bytes())
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
	err = sc.Err()
	if attemptCtx.Err() != nil {
		return h.transportError(attemptCtx, err)
	}
	if err == nil {
		err = io.ErrUnexpectedEOF // the body ended without the provider's final event
	}
	return &ProviderError{
		Provider: h.id, Address: h.base, Message: ErrStreamIncomplete.Error() + ": " + err.Error(),
		Retryable: true, Err: errors.Join(ErrStreamIncomplete, err),
	}
}

// deliver passes a text chunk to the caller, marking its errors as the consumer's.
func deliver(onDelta func(string) error, text string) error {
	if text == "" || onDelta == nil {
		return nil
	}
	if err := onDelta(text); err != nil {
		return &callbackError{err: err}
	}
	return nil
}

// withTimeout bounds one non-streaming attempt.
func (h *httpBase) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, h.timeout, errAttemptTimeout)
}

// decodeJSON reads a successful non-streaming body.
//
// The body is read whole and decoded by goccy/go-json: encoding/json's
// streaming decoder was 3.7 % of the gateway's CPU at 64 connections, and
// goccy decodes a chat completion about 5 times faster (docs/benchmarks/2026-11-history.md,
// "Chat path: batches that wait for the calls in flight").
// TestDecodeJSONAgreesWithEncodingJSON holds the two to the same result.
func (h *httpBase) decodeJSON(ctx context.Context, resp *http.Response, v any) error {
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return h.transportError(ctx, err)
	}
	if len(raw) > maxResponseBody {
		// A provider does not answer one call with this much; an endpoint
		// that does would otherwise fill the gateway's memory.
		return &ProviderError{Provider: h.id, Address: h.base, StatusCode: resp.StatusCode,
			Message: fmt.Sprintf("unreadable response: larger than %d MiB", maxResponseBody>>20)}
	}
	if gojson.Unmarshal(raw, v) == nil {
		return nil
	}
	// Refused: encoding/json decides, and words the error, as it always
	// did (a body cut short is a transport failure, retried).
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(v); err != nil {
		if ctx.Err() != nil || isNetErr(err) {
			return h.transportError(ctx, err)
		}
		return &ProviderError{Provider: h.id, Address: h.base, StatusCode: resp.StatusCode,
			Message: "unreadable response: " + err.Error(), Err: err}
	}
	return nil
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// sseData returns the payload of an SSE "data:" line. Both OpenAI and Anthropic send each event as
// one data line whose JSON names its own type, so lines are handled as they come instead of waiting
// for the blank line that ends an event; a stream whose last blank line is lost still parses.
// Comments, event: and id: lines and blank lines give ok=false.
func sseData(line []byte) (payload []byte, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte("data:"))
	if !found {
		return nil, false
	}
	return bytes.TrimSpace(rest), true
}
