package inlinehttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a loopback HTTP server that counts the connections it accepted
// and the requests it served.
type server struct {
	*httptest.Server
	conns, closed, requests atomic.Int64
}

func newServer(t *testing.T, tls bool, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed:
			s.closed.Add(1)
		}
	}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"got":%q}`, b)
}

func newTransport(s *server) *Transport {
	fallback := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}
	if s != nil && s.TLS != nil {
		fallback.TLSClientConfig = s.Client().Transport.(*http.Transport).TLSClientConfig
	}
	return New(fallback)
}

func post(t *testing.T, c *http.Client, ctx context.Context, u, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

func TestKeepsTheConnectionAlive(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			s := newServer(t, useTLS, echo)
			c := &http.Client{Transport: newTransport(s)}
			for i := range 20 {
				if got, want := post(t, c, context.Background(), s.URL+"/v1", fmt.Sprint(i)), fmt.Sprintf(`{"got":"%d"}`, i); got != want {
					t.Fatalf("answer %d = %s, want %s", i, got, want)
				}
			}
			if n := s.conns.Load(); n != 1 {
				t.Fatalf("20 requests in a row opened %d connections, want 1", n)
			}
		})
	}
}

func TestCancellationAbortsABlockedRequest(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			return
		}
		if r.URL.Path == "/body" {
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "first part\n")
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c := &http.Client{Transport: newTransport(s)}

	t.Run("waiting for the head", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/head", strings.NewReader("x"))
		_, err := c.Do(req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("cancelled request returned after %v", d)
		}
	})
	t.Run("reading the body", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/body", strings.NewReader("x"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "first part\n" {
			t.Fatalf("first line = %q, %v", line, err)
		}
		time.AfterFunc(100*time.Millisecond, cancel)
		if _, err := br.ReadString('\n'); err == nil {
			t.Fatal("read after cancellation succeeded")
		}
	})
	// A connection whose request was cancelled is not reused.
	if got := post(t, c, context.Background(), s.URL+"/", ""); got != "" {
		t.Fatalf("answer %q", got)
	}
}

func TestAConnectionTheServerClosedIsNotReused(t *testing.T) {
	s := newServer(t, false, echo)
	c := &http.Client{Transport: newTransport(s)}
	post(t, c, context.Background(), s.URL, "one")
	s.CloseClientConnections() // the server drops the idle connection
	time.Sleep(50 * time.Millisecond)
	if got := post(t, c, context.Background(), s.URL, "two"); got != `{"got":"two"}` {
		t.Fatalf("answer after the server closed the idle connection: %s", got)
	}
	if n := s.requests.Load(); n != 2 {
		t.Fatalf("server saw %d requests, want 2 (none sent twice)", n)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2", n)
	}
}

// A server that answers before reading the whole request (a 413 for a body
// too large) and closes makes the write fail; the caller gets the answer,
// as from net/http, not "broken pipe".
func TestAnAnswerBeforeTheWholeRequestIsReturned(t *testing.T) {
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprint(w, `{"error":"request too large"}`)
	})
	c := &http.Client{Transport: newTransport(s)}
	resp, err := c.Post(s.URL, "application/json", strings.NewReader(strings.Repeat("x", 32<<20)))
	if err != nil {
		t.Fatalf("POST of a body the server refused early: %v, want its 413", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != `{"error":"request too large"}` || err != nil {
		t.Fatalf("answer %d %q (%v)", resp.StatusCode, b, err)
	}
	if got := post(t, c, context.Background(), s.URL, ""); got != `{"error":"request too large"}` {
		t.Fatalf("next answer %q", got)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("connections = %d, want 2 (the refused request's is not reused)", n)
	}
}

func TestABodyNotReadToItsEndClosesTheConnection(t *testing.T) {
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 64<<10))
	})
	c := &http.Client{Transport: newTransport(s)}
	for range 3 {
		resp, err := c.Post(s.URL, "text/plain", strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want 3 (a half-read response's connection is not reused)", n)
	}
}

func TestClosingABodyAbortsItsReadOnAnotherGoroutine(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release // the rest of the stream never comes while the client reads
	})
	defer close(release)
	c := &http.Client{Transport: newTransport(s)}
	resp, err := c.Post(s.URL, "text/plain", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the reader block on the stream
	resp.Body.Close()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("a read aborted by Close ended without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not abort the blocked read")
	}
}

// Connections idle past IdleTimeout are closed even when no request comes
// to take them (the bottom of the LIFO pool after a burst).
func TestIdleConnectionsAreClosedAfterIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		<-release // hold all three until each has its own connection
		echo(w, r)
	})
	tr := newTransport(s)
	tr.IdleTimeout = 100 * time.Millisecond
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, c, context.Background(), s.URL, fmt.Sprint(i))
		}()
	}
	for s.requests.Load() < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want 3", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.closed.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.closed.Load(); n != 3 {
		t.Fatalf("%d of 3 idle connections closed after their idle timeout", n)
	}
	tr.mu.Lock()
	left := len(tr.idle)
	tr.mu.Unlock()
	if left != 0 {
		t.Fatalf("the pool still holds connections of %d hosts", left)
	}
}

func TestConnectionCloseIsHonoured(t *testing.T) {
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		echo(w, r)
	})
	c := &http.Client{Transport: newTransport(s)}
	for i := range 3 {
		post(t, c, context.Background(), s.URL, fmt.Sprint(i))
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want 3", n)
	}
}

func TestStreamsAChunkedBodyAsItComes(t *testing.T) {
	next := make(chan struct{})
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			echo(w, r)
			return
		}
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n", i)
			w.(http.Flusher).Flush()
			<-next
		}
	})
	c := &http.Client{Transport: newTransport(s)}
	resp, err := c.Post(s.URL+"/stream", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if te := resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Fatalf("transfer encoding %v, want chunked", te)
	}
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("line %d = %q, %v", i, line, err)
		}
		next <- struct{}{} // the next chunk is written only after this one was read
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the last chunk: %v, want EOF", err)
	}
	// Read to its end, the connection is reused.
	post(t, c, context.Background(), s.URL, "")
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("connections = %d, want 1", n)
	}
}

// fallbackRecorder answers every request itself.
type fallbackRecorder struct{ calls atomic.Int64 }

func (f *fallbackRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	return &http.Response{StatusCode: http.StatusTeapot, Body: http.NoBody, Request: r}, nil
}

func TestProxiedRequestsGoToTheFallback(t *testing.T) {
	s := newServer(t, false, echo)
	tr := newTransport(s)
	f := &fallbackRecorder{}
	tr.Fallback = f
	proxy, _ := url.Parse("http://proxy.invalid:3128")
	tr.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Path == "/via-proxy" {
			return proxy, nil
		}
		return nil, nil
	}
	c := &http.Client{Transport: tr}
	resp, err := c.Get(s.URL + "/via-proxy")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || f.calls.Load() != 1 || s.requests.Load() != 0 {
		t.Fatalf("proxied request: status %d, fallback calls %d, direct requests %d", resp.StatusCode, f.calls.Load(), s.requests.Load())
	}
	post(t, c, context.Background(), s.URL+"/direct", "x")
	if f.calls.Load() != 1 || s.requests.Load() != 1 {
		t.Fatalf("direct request: fallback calls %d, direct requests %d", f.calls.Load(), s.requests.Load())
	}
}

func TestConcurrentRequestsKeepAtMostMaxIdle(t *testing.T) {
	s := newServer(t, false, echo)
	tr := newTransport(s)
	tr.MaxIdlePerHost = 2
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				body := fmt.Sprintf("%d-%d", g, i)
				if got := post(t, c, context.Background(), s.URL, body); got != `{"got":"`+body+`"}` {
					t.Errorf("answer %s to %s", got, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	tr.mu.Lock()
	idle := 0
	for _, l := range tr.idle {
		idle += len(l)
	}
	tr.mu.Unlock()
	if idle > 2 {
		t.Fatalf("%d idle connections kept, want at most 2", idle)
	}
	if s.requests.Load() != 16*25 {
		t.Fatalf("server saw %d requests, want %d", s.requests.Load(), 16*25)
	}
	tr.CloseIdleConnections()
}

func TestAnAnswerWithoutBodyFreesTheConnection(t *testing.T) {
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusNoContent)
	})
	c := &http.Client{Transport: newTransport(s)}
	for range 3 {
		resp, err := c.Post(s.URL, "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("status %d, want 204 (after the 103)", resp.StatusCode)
		}
		// Not read, not closed: the connection is already back.
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("connections = %d, want 1", n)
	}
}
