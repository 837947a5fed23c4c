package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Proxy is an HTTP proxy on a loopback port whose every upstream
// connection is made by the policy's DialContext. A program that cannot
// be given a Go dialer (git) is pointed at it, so its connections pass
// the same check at dial time as the gateway's own clients: HTTPS goes
// through CONNECT (the tunnel is opened to the resolved, checked
// address), plain HTTP through absolute-URI requests forwarded one by
// one (a redirect is a new request, checked again).
//
// It is small on purpose (net/http and io.Copy, no proxy library): it
// forwards, it does not cache, rewrite or authenticate.
type Proxy struct {
	policy    Policy
	allowHTTP bool
	ln        net.Listener
	srv       *http.Server
	transport *http.Transport

	mu      sync.Mutex
	refusal error
	tunnels map[net.Conn]bool // hijacked connections, closed by Close
}

// DialTimeout bounds each upstream connection the proxy makes.
var DialTimeout = 10 * time.Second

// StartProxy listens on 127.0.0.1 (a free port) and serves until Close.
// allowHTTP lets plain-HTTP requests through (HTTPS is always tunnelled).
func (p Policy) StartProxy(allowHTTP bool) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start the fetch proxy: %w", err)
	}
	x := &Proxy{policy: p, allowHTTP: allowHTTP, ln: ln, tunnels: map[net.Conn]bool{}}
	x.transport = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return x.dial(ctx, network, addr)
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 2 * time.Minute,
	}
	x.srv = &http.Server{Handler: x, ReadHeaderTimeout: 30 * time.Second}
	go x.srv.Serve(ln)
	return x, nil
}

// URL is the proxy's address for clients (http://127.0.0.1:PORT).
func (x *Proxy) URL() string { return "http://" + x.ln.Addr().String() }

// Close stops the proxy and every tunnel it holds.
func (x *Proxy) Close() error {
	x.transport.CloseIdleConnections()
	err := x.srv.Close()
	x.mu.Lock()
	defer x.mu.Unlock()
	for c := range x.tunnels {
		c.Close()
	}
	return err
}

// track remembers a tunnel's connections for Close.
func (x *Proxy) track(conns ...net.Conn) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range conns {
		x.tunnels[c] = true
	}
}

func (x *Proxy) untrack(conns ...net.Conn) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range conns {
		delete(x.tunnels, c)
		c.Close()
	}
}

// Refusal is the first connection the policy refused (nil if none): the
// reason a fetch through the proxy failed, naming policy and address.
func (x *Proxy) Refusal() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.refusal
}

func (x *Proxy) refuse(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.refusal == nil {
		x.refusal = err
	}
}

func (x *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := x.policy.DialContext(ctx, network, addr, DialTimeout)
	if errors.Is(err, ErrBlocked) {
		x.refuse(err)
	}
	return conn, err
}

// ServeHTTP tunnels CONNECT and forwards absolute-URI requests.
func (x *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		x.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "this is a forward proxy: absolute URIs only", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" || !x.allowHTTP {
		err := fmt.Errorf("refused by the SSRF policy (%s): %s URLs are not fetched here (%s)", PolicyName, r.URL.Scheme, r.URL.Host)
		x.refuse(err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	removeHopHeaders(out.Header)
	resp, err := x.transport.RoundTrip(out)
	if err != nil {
		upstreamFailed(w, err)
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// connect opens a tunnel to the checked address and copies both ways.
func (x *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	upstream, err := x.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		upstreamFailed(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	x.track(client, upstream)
	defer x.untrack(client, upstream)
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// Bytes the client sent after the CONNECT header (a TLS hello
		// already read into the buffer) go first.
		if n := buf.Reader.Buffered(); n > 0 {
			b, _ := buf.Reader.Peek(n)
			upstream.Write(b)
		}
		io.Copy(upstream, client)
		closeWrite(upstream)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(client, upstream)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
}

var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// upstreamFailed answers a request whose upstream could not be reached:
// 403 when the policy refused the address (the error names it), else 502.
func upstreamFailed(w http.ResponseWriter, err error) {
	status := http.StatusBadGateway
	if errors.Is(err, ErrBlocked) {
		status = http.StatusForbidden
	}
	http.Error(w, err.Error(), status)
}
