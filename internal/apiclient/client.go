// Package apiclient is the agentry command-line client's view of the
// gateway's REST API. The requests and the answer types are generated from
// docs/openapi.yaml (package openapi beside it); this package adds what a
// generated client does not know: the gateway URL (http(s):// or
// unix:///path/to/socket), the bearer key, the {"error": ...} envelope as
// *APIError, the body of every answer (so --json prints exactly what the
// gateway sent) and the SSE streams of chat and logs read as they arrive.
//
// It imports no server package: the CLI that uses it links no database,
// Temporal or workflow code (TestCLIImportsNoServerPackage in cli/agentry).
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// APIPrefix is the versioned API path.
const APIPrefix = "/api/v1"

// Client talks to one gateway.
type Client struct {
	base string // http(s)://host[:port] without a trailing slash
	// api answers within Options.Timeout; stream has no overall timeout
	// (streams last as long as they last); root serves /health, which is
	// outside the API prefix.
	api, stream, root *openapi.Client
}

// Options tune New.
type Options struct {
	// Timeout bounds one non-streaming request (default 60 s).
	Timeout time.Duration
	// UserAgent is sent with every request.
	UserAgent string
}

// New builds a client for baseURL with an API key ("" sends none).
func New(baseURL, apiKey string, opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("gateway URL %q: %w", baseURL, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	var base string
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, fmt.Errorf("gateway URL %q has no host", baseURL)
		}
		base = strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/")
	case "unix":
		sock := u.Path
		if sock == "" {
			sock = u.Opaque
		}
		if sock == "" {
			return nil, fmt.Errorf("gateway URL %q: unix URLs name a socket path, e.g. unix:///run/agentry.sock", baseURL)
		}
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		base = "http://unix"
	default:
		return nil, fmt.Errorf("gateway URL %q: use http://, https:// or unix://", baseURL)
	}
	rt := userAgent{transport, opts.UserAgent}
	headers := openapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Accept", "application/json, text/event-stream")
		if apiKey != "" {
			r.Header.Set("Authorization", "Bearer "+apiKey)
		}
		return nil
	})
	build := func(server string, hc *http.Client) (*openapi.Client, error) {
		return openapi.NewClient(server, openapi.WithHTTPClient(hc), headers)
	}
	c := &Client{base: base}
	if c.api, err = build(base+APIPrefix, &http.Client{Timeout: opts.Timeout, Transport: rt}); err != nil {
		return nil, err
	}
	if c.stream, err = build(base+APIPrefix, &http.Client{Transport: rt}); err != nil {
		return nil, err
	}
	if c.root, err = build(base, &http.Client{Timeout: opts.Timeout, Transport: rt}); err != nil {
		return nil, err
	}
	return c, nil
}

type userAgent struct {
	rt http.RoundTripper
	ua string
}

func (u userAgent) RoundTrip(r *http.Request) (*http.Response, error) {
	if u.ua != "" {
		r.Header.Set("User-Agent", u.ua)
	}
	return u.rt.RoundTrip(r)
}

// APIError is an answer with a 4xx/5xx status: the gateway's error text
// and code, and the whole body.
type APIError struct {
	Status  int
	Message string
	Code    string
	Body    []byte
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("gateway answered HTTP %d", e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// IsStatus reports whether err is an APIError with that status.
func IsStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// ConnectionError means the gateway could not be reached at all.
type ConnectionError struct {
	URL string
	Err error
}

func (e *ConnectionError) Error() string {
	return fmt.Sprintf("cannot reach the gateway at %s: %v", e.URL, e.Err)
}

func (e *ConnectionError) Unwrap() error { return e.Err }

// Raw is embedded in every answer: the response body it was decoded from.
type Raw struct{ body []byte }

// RawJSON is the body the gateway sent.
func (r Raw) RawJSON() []byte { return r.body }

func (r *Raw) setRaw(b []byte) { r.body = b }

type rawSetter interface{ setRaw([]byte) }

// read finishes a generated call: a transport failure becomes a
// *ConnectionError, a 4xx/5xx answer an *APIError, and a JSON answer is
// decoded into out (may be nil) with its body kept. Fields the document
// does not name (a newer gateway) are ignored, not an error.
func (c *Client) read(ctx context.Context, what string, resp *http.Response, err error, out any) error {
	if err != nil {
		return c.sendError(ctx, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", what, err)
	}
	if resp.StatusCode >= 400 {
		return decodeError(resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	if rs, ok := out.(rawSetter); ok {
		rs.setRaw(raw)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer of %s: %w", what, err)
	}
	return nil
}

// sendError classifies an error of sending a request: the caller's
// cancellation as is, a failed exchange as *ConnectionError.
func (c *Client) sendError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		return fmt.Errorf("build request: %w", err)
	}
	return &ConnectionError{URL: c.base, Err: rootCause(err)}
}

func rootCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func decodeError(status int, raw []byte) error {
	e := &APIError{Status: status, Body: raw}
	// Only the two fields every error has: a context field of a shape this
	// client does not know must not hide the message.
	var env struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(raw, &env) == nil {
		e.Message, e.Code = env.Error, env.Code
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(raw))
		if len(e.Message) > 300 {
			e.Message = e.Message[:300] + "..."
		}
	}
	return e
}
