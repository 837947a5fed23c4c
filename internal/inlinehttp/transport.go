// Package inlinehttp is an HTTP/1.1 client transport that does a request's
// network I/O on the goroutine that sends it.
//
// net/http's Transport gives every connection a reading and a writing
// goroutine: a request is handed to the writer, its response is read by the
// reader and handed back, and the connection's return to the pool is one
// more hand-off. On a gateway that sends one short provider request per
// chat request those wake-ups cost more CPU than the request itself
// (docs/benchmarks/2026-11-history.md, "Chat path: provider calls on the caller's
// goroutine"). Here the caller writes the request and reads the response;
// only the netpoller wakes it.
//
// The protocol is net/http's own (Request.Write, http.ReadResponse). What
// this package adds is a pool of kept-alive connections and cancellation:
// a request whose context ends gets its connection's deadline set in the
// past, which fails the blocked read or write at once.
//
// Requests this transport does not handle go to Fallback: a proxy from the
// environment applies, or the scheme is neither http nor https.
package inlinehttp

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Transport is an http.RoundTripper; the zero value is not usable (New).
type Transport struct {
	// Fallback sends the requests this transport does not (see the
	// package comment).
	Fallback http.RoundTripper
	// Proxy, when set, is asked for every request; a request that gets a
	// proxy goes to Fallback.
	Proxy func(*http.Request) (*url.URL, error)
	// Dial opens a connection.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is cloned for every TLS connection (ServerName set from
	// the request's host, ALPN http/1.1).
	TLSConfig *tls.Config
	// MaxIdlePerHost bounds the kept-alive connections of one host.
	MaxIdlePerHost int
	// IdleTimeout closes a connection idle that long instead of reusing it.
	IdleTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS handshake (0: the request's
	// context alone).
	TLSHandshakeTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*conn
	// janitor closes connections idle past IdleTimeout (prune); armed
	// while any connection is idle.
	janitor      *time.Timer
	janitorArmed bool
}

// New returns a Transport with fallback as its Fallback and the proxy,
// dialer, TLS, idle and pool settings of fallback.
func New(fallback *http.Transport) *Transport {
	dial := fallback.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t := &Transport{
		Fallback: fallback, Proxy: fallback.Proxy, Dial: dial, TLSConfig: fallback.TLSClientConfig,
		MaxIdlePerHost: fallback.MaxIdleConnsPerHost, IdleTimeout: fallback.IdleConnTimeout,
		TLSHandshakeTimeout: fallback.TLSHandshakeTimeout,
	}
	if t.MaxIdlePerHost <= 0 {
		t.MaxIdlePerHost = http.DefaultMaxIdleConnsPerHost
	}
	return t
}

// conn is one kept-alive connection.
type conn struct {
	key    string
	nc     net.Conn
	raw    syscall.RawConn // of the TCP connection under nc; nil if none
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
}

// RoundTrip implements http.RoundTripper.
//
// A request is sent once. net/http sends a POST again only when not a byte
// of it was written; here a kept-alive connection is checked before it is
// reused (alive), which catches the connections a server closed while they
// were idle, and a request that fails on one is not sent again: the
// provider client's own retries decide that, and the ledger counts them.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.Fallback.RoundTrip(req)
	}
	c, err := t.conn(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.exchange(c, req)
	if err != nil {
		closeBody(req)
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	return resp, nil
}

// handles reports whether req is one for this transport.
func (t *Transport) handles(req *http.Request) bool {
	if req.URL == nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Host == "" {
		return false
	}
	if t.Proxy != nil {
		if p, err := t.Proxy(req); err != nil || p != nil {
			return false
		}
	}
	return true
}

// exchange writes req on c and reads the response's head. The body is
// read by the caller, from c, and gives c back to the pool at its end.
func (t *Transport) exchange(c *conn, req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.nc.Close()
		return nil, err
	}
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	if werr != nil {
		// A server may answer before it read the whole request (a 413 for
		// a body too large) and close: the write then fails, but its
		// answer says more than "broken pipe". net/http reads and writes
		// at once and returns that answer; here it is looked for after the
		// write failed, briefly, and the connection is not reused.
		if ctx.Err() == nil {
			_ = c.nc.SetReadDeadline(time.Now().Add(earlyAnswerWait))
			if resp, err := http.ReadResponse(c.br, req); err == nil && resp.StatusCode >= 200 {
				// The body is read without that bound; a cancellation
				// that set its deadline meanwhile is set again.
				_ = c.nc.SetReadDeadline(time.Time{})
				if ctx.Err() != nil {
					_ = c.nc.SetDeadline(time.Unix(1, 0))
				}
				resp.Close = true
				return t.answer(c, req, resp, stop), nil
			}
		}
		return fail(fmt.Errorf("inlinehttp: write request: %w", werr))
	}
	resp, err := http.ReadResponse(c.br, req)
	// Informational answers (103 Early Hints) come before the response.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(c.br, req)
	}
	if err != nil {
		return fail(fmt.Errorf("inlinehttp: read response: %w", err))
	}
	return t.answer(c, req, resp, stop), nil
}

// earlyAnswerWait bounds the look for an answer after a request's write
// failed (see exchange).
const earlyAnswerWait = 250 * time.Millisecond

// answer hands resp to the caller with a body that frees c at its end.
func (t *Transport) answer(c *conn, req *http.Request, resp *http.Response, stop func() bool) *http.Response {
	b := &body{rc: resp.Body, c: c, t: t, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.finish(true) // nothing to read (204, 304, HEAD): the connection is free now
		return resp
	}
	resp.Body = b
	return resp
}

// conn returns a kept-alive connection to req's host, or a new one.
func (t *Transport) conn(req *http.Request) (*conn, error) {
	addr := canonicalAddr(req.URL)
	key := req.URL.Scheme + "://" + addr
	if c := t.takeIdle(key); c != nil {
		return c, nil
	}
	ctx := req.Context()
	nc, err := t.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stream := nc // what requests are written to: nc, or TLS over it
	if req.URL.Scheme == "https" {
		cfg := &tls.Config{}
		if t.TLSConfig != nil {
			cfg = t.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = req.URL.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		hctx := ctx
		if t.TLSHandshakeTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		stream = tc
	}
	return &conn{key: key, nc: stream, raw: rawConn(nc), br: bufio.NewReaderSize(stream, 4<<10), bw: bufio.NewWriterSize(stream, 4<<10)}, nil
}

// takeIdle pops the most recently used idle connection of key that has
// not timed out and is still open.
func (t *Transport) takeIdle(key string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	for list := t.idle[key]; len(list) > 0; list = t.idle[key] {
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		if (t.IdleTimeout > 0 && time.Since(c.idleAt) > t.IdleTimeout) || !c.alive() {
			_ = c.nc.Close()
			continue
		}
		return c
	}
	return nil
}

// putIdle keeps c for the next request, or closes it when the pool of its
// host is full.
func (t *Transport) putIdle(c *conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	if len(t.idle[c.key]) < t.MaxIdlePerHost {
		t.idle[c.key] = append(t.idle[c.key], c)
		c = nil
		t.armJanitorLocked()
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.nc.Close()
	}
}

// armJanitorLocked makes sure prune runs while connections are idle. The
// pool is LIFO, so after a burst the connections at the bottom may never
// be taken again: without it they would stay open (and, once the server
// closed them, half-closed) for as long as any request goes to the host.
func (t *Transport) armJanitorLocked() {
	if t.IdleTimeout <= 0 || t.janitorArmed {
		return
	}
	t.janitorArmed = true
	if t.janitor == nil {
		t.janitor = time.AfterFunc(t.IdleTimeout, t.prune)
		return
	}
	t.janitor.Reset(t.IdleTimeout)
}

// prune closes the connections idle past IdleTimeout (the oldest, at the
// front of each host's list) and runs again while any stay idle.
func (t *Transport) prune() {
	now := time.Now()
	var stale []*conn
	t.mu.Lock()
	for key, list := range t.idle {
		n := 0
		for n < len(list) && now.Sub(list[n].idleAt) > t.IdleTimeout {
			n++
		}
		if n == 0 {
			continue
		}
		stale = append(stale, list[:n]...)
		kept := append(list[:0], list[n:]...)
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, key)
		} else {
			t.idle[key] = kept
		}
	}
	t.janitorArmed = false
	if len(t.idle) > 0 {
		t.armJanitorLocked()
	}
	t.mu.Unlock()
	for _, c := range stale {
		_ = c.nc.Close()
	}
}

// CloseIdleConnections closes the kept-alive connections (as
// http.Transport's; http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			_ = c.nc.Close()
		}
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// body is a response body read from its connection; the connection goes
// back to the pool once the body was read to its end.
type body struct {
	rc   io.ReadCloser
	c    *conn
	t    *Transport
	stop func() bool
	keep bool
	// done is set once, by the first finish; atomic because a body may be
	// closed while another goroutine reads it (to abort a stream).
	done atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
	}
	return n, err
}

// Close gives the connection back when the body was read to its end and
// closes it otherwise (what is left of the body is not read).
func (b *body) Close() error {
	b.finish(false)
	return nil
}

func (b *body) finish(atEOF bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	// stop reports false when the context already ended: the deadline is
	// (or is about to be) in the past, so the connection is not reused.
	reuse := b.stop() && atEOF && b.keep && b.c.br.Buffered() == 0
	if reuse {
		b.t.putIdle(b.c)
		return
	}
	_ = b.c.nc.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// canonicalAddr is host:port, with the scheme's port when the URL has none.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// rawConn is nc's file descriptor access, when nc has one.
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}
