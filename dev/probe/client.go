package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// request is one HTTP request of the probe. Auth is the whole
// Authorization header; "" sends none.
type request struct {
	Family  string // route family, for the tables
	Method  string
	Path    string // with the query
	Auth    string
	Headers map[string]string
	Body    []byte
	// ContentType defaults to application/json when there is a body.
	ContentType string
	// Kind names the mutation (bad id, malformed JSON, ...).
	Kind string
	// NumericID: the route's ids are numbers (bad ids there are checked
	// for non-canonical spellings being accepted).
	NumericID bool
	// Pad > 0 replaces the string padMark in Body by Pad bytes of PadWith
	// when the request is sent (huge bodies are not kept in memory).
	Pad     int
	PadWith string
}

// padMark stands for a huge string in a request's body until it is sent.
const padMark = "\x00PAD\x00"

// answer is what came back.
type answer struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
	// Hung: no answer within the per-request timeout.
	Hung bool
	// Stream: an event stream was opened (the request was accepted).
	Stream bool
	Err    error
	Took   time.Duration
}

// client talks to the gateway and keeps every answer body, for the
// secrets search.
type client struct {
	base    string
	key     string
	timeout time.Duration
	hc      *http.Client

	mu      sync.Mutex
	answers bytes.Buffer
}

func newClient(base, key string, timeout time.Duration) *client {
	return &client{base: base, key: key, timeout: timeout, hc: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 16,
		// Like curl: a large body is announced and the server may refuse
		// it (413) before it is sent.
		ExpectContinueTimeout: 5 * time.Second,
	}}}
}

// maxKept bounds the part of one answer read (and kept for the secrets
// search).
const maxKept = 8 << 20

// send sends r and reads the answer within the client's timeout.
func (c *client) send(r request) answer {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	began := time.Now()
	if r.Pad > 0 {
		mark, _ := json.Marshal(padMark)
		pad := strings.Repeat(r.PadWith, max(1, r.Pad/len(r.PadWith)))
		r.Body = bytes.Replace(r.Body, mark, []byte(`"`+pad+`"`), 1)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, c.base+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		return answer{Err: err}
	}
	if r.Body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if r.Body != nil {
		ct := r.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if len(r.Body) > 1<<20 {
		req.Header.Set("Expect", "100-continue")
	}
	if r.Auth != "" {
		req.Header.Set("Authorization", r.Auth)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{Err: err, Hung: errors.Is(err, context.DeadlineExceeded), Took: time.Since(began)}
	}
	defer resp.Body.Close()
	a := answer{Status: resp.StatusCode, Header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		a.Stream, a.Took = true, time.Since(began)
		return a
	}
	a.Raw, err = io.ReadAll(io.LimitReader(resp.Body, maxKept))
	a.Took = time.Since(began)
	if err != nil {
		a.Err, a.Hung = err, errors.Is(err, context.DeadlineExceeded)
	}
	_ = json.Unmarshal(a.Raw, &a.JSON)
	c.keep(a.Raw)
	return a
}

func (c *client) keep(b []byte) {
	c.mu.Lock()
	c.answers.Write(b)
	c.answers.WriteByte('\n')
	c.mu.Unlock()
}

// collected is every answer body so far.
func (c *client) collected() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.answers.Bytes())
}

// call sends a request with the admin key; body is JSON-encoded unless it
// is nil or []byte.
func (c *client) call(method, path string, body any) answer {
	r := request{Method: method, Path: path, Auth: "Bearer " + c.key}
	switch b := body.(type) {
	case nil:
	case []byte:
		r.Body = b
	default:
		r.Body, _ = json.Marshal(b)
	}
	return c.send(r)
}

// readStream reads an event stream for a while (it never ends on its own)
// and keeps what came.
func (c *client) readStream(path string, d time.Duration) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // ends with the context
	c.keep(b)
	return b
}

// id reads a numeric or string id field of an answer.
func (a answer) id(field string) string {
	switch v := a.JSON[field].(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case string:
		return v
	}
	return ""
}
