// Package client is a small typed client of the Agentry REST API, used by
// the agentry command-line client. It sends the bearer key, decodes the
// {"error": ...} envelope into *APIError, keeps every response body (so
// --json prints exactly what the gateway sent) and reads the SSE streams of
// chat and logs as they arrive.
//
// Base URLs are http(s)://host:port or unix:///path/to/socket (the API over
// a Unix socket).
package client

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
	"strings"
	"time"
)

// APIPrefix is the versioned API path.
const APIPrefix = "/api/v1"

// Client talks to one gateway.
type Client struct {
	base   string // http(s)://host[:port] without a trailing slash
	apiKey string
	http   *http.Client
	// stream has no overall timeout: streams last as long as they last.
	stream *http.Client
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
	c := &Client{base: base, apiKey: apiKey,
		http:   &http.Client{Timeout: opts.Timeout, Transport: userAgent{transport, opts.UserAgent}},
		stream: &http.Client{Transport: userAgent{transport, opts.UserAgent}}}
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

// Raw is embedded in every result: the response body it was decoded from.
type Raw struct{ body []byte }

// RawJSON is the body the gateway sent.
func (r Raw) RawJSON() []byte { return r.body }

func (r *Raw) setRaw(b []byte) { r.body = b }

type rawSetter interface{ setRaw([]byte) }

// Do sends a request to path (relative to the API prefix unless it starts
// with "/health" or "http") and decodes a JSON answer into out (may be nil).
// body may be nil, []byte (sent as is) or any value (sent as JSON).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, c.http, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read answer of %s %s: %w", method, path, err)
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
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) url(path string) string {
	if strings.HasPrefix(path, "/health") {
		return c.base + path
	}
	return c.base + APIPrefix + path
}

func (c *Client) send(ctx context.Context, hc *http.Client, method, path string, body any, contentType string) (*http.Response, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), r)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ConnectionError{URL: c.base, Err: rootCause(err)}
	}
	return resp, nil
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

// Event is one Server-Sent Event.
type Event struct {
	// Name is the event: field ("" for plain data events).
	Name string
	// Data is the data lines joined with "\n".
	Data string
}

// Stream POSTs (body != nil) or GETs path and calls onEvent for each SSE
// event as it arrives, until the stream ends, ctx ends, or onEvent returns
// an error (returned; io.EOF from onEvent ends quietly). A 4xx/5xx answer
// before the stream starts is an *APIError.
func (c *Client) Stream(ctx context.Context, method, path string, body any, onEvent func(Event) error) error {
	resp, err := c.send(ctx, c.stream, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		raw, _ := io.ReadAll(resp.Body)
		return decodeError(resp.StatusCode, raw)
	}
	err = ReadEvents(resp.Body, onEvent)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ReadEvents parses an SSE stream (comments and id/retry fields ignored).
func ReadEvents(r io.Reader, onEvent func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev Event
	var data []string
	has := false
	flush := func() error {
		if !has {
			return nil
		}
		ev.Data = strings.Join(data, "\n")
		err := onEvent(ev)
		ev, data, has = Event{}, nil, false
		return err
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if err := flush(); err != nil {
				return err
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			has = true
		case strings.HasPrefix(line, "data:"):
			v := strings.TrimPrefix(line, "data:")
			v = strings.TrimPrefix(v, " ")
			data = append(data, v)
			has = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stream: %w", err)
	}
	return flush()
}
