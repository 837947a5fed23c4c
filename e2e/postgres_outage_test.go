package e2e

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// TestPostgresOutageAnswers503AndRecovers cuts the gateway off from its
// PostgreSQL mid-load and brings it back (issue 48, "Bad input": a gateway
// that loses PostgreSQL answers 503 with Retry-After and recovers by itself).
// The cut is a TCP proxy between them that drops every connection and stops
// listening, which is what a stopped or failed-over server looks like to the
// pool; the gateway is never restarted.
func TestPostgresOutageAnswers503AndRecovers(t *testing.T) {
	dsn := testenv.Postgres(t)
	if dsn == "" {
		t.Skip("PostgreSQL not available")
	}
	proxy := startCuttableProxy(t, postgresAddr(t, dsn))
	cfg := "storage: {backend: postgres, dsn: \"" + throughProxy(t, dsn, proxy.addr) + "\"}\n"
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: agentsFor(), Config: cfg})

	chat := func() gatewaytest.Response {
		return g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "hello through postgres"})
	}
	createTask := func(title string) gatewaytest.Response {
		return g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": title})
	}
	if r := chat(); r.Status != 200 {
		t.Fatalf("chat before the outage: %d %s", r.Status, r.Raw)
	}
	if r := createTask("before the outage"); r.Status != 201 {
		t.Fatalf("create task before the outage: %d %s", r.Status, r.Raw)
	}

	proxy.cut()
	cutAt := time.Now()
	// The pool may hold a connection that has not noticed yet: the first
	// request after the cut can fail on it, every one after must be a 503.
	var down gatewaytest.Response
	for i := 0; i < 5; i++ {
		if down = createTask("during the outage"); down.Status == 503 {
			break
		}
	}
	assertDatabaseUnavailable(t, "create task", down)
	assertDatabaseUnavailable(t, "list tasks", g.Do("GET", "/api/v1/workboard/tasks", nil))
	assertDatabaseUnavailable(t, "chat", chat())
	live := g.Do("GET", "/health/live", nil)
	if live.Status != 503 || live.JSON["status"] != "degraded" || !strings.Contains(string(live.Raw), "database is unavailable") {
		t.Fatalf("/health/live during the outage: %d %s, want 503 degraded naming the database", live.Status, live.Raw)
	}
	if strings.Contains(string(live.Raw), proxy.addr) {
		t.Fatalf("/health/live names the database address: %s", live.Raw)
	}

	// An outage of more than a second, as a restart or failover is: pgx
	// checks a pooled connection with a ping only when it has been idle
	// for over a second, so after a shorter blip a connection last used
	// just before the cut fails the one request that takes it
	// (decisions.md, "PostgreSQL outage").
	if wait := time.Until(cutAt.Add(1500 * time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	proxy.restore()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := g.Do("GET", "/health/live", nil)
		if r.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health/live after PostgreSQL came back: %d %s", r.Status, r.Raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := createTask("after the outage"); r.Status != 201 {
		t.Fatalf("create task after the outage: %d %s", r.Status, r.Raw)
	}
	if r := chat(); r.Status != 200 {
		t.Fatalf("chat after the outage: %d %s", r.Status, r.Raw)
	}
	// Nothing the outage refused was half-written: the tasks are the two
	// that were answered 201.
	list := g.Do("GET", "/api/v1/workboard/tasks", nil)
	if list.Status != 200 || strings.Count(string(list.Raw), "during the outage") != 0 ||
		!strings.Contains(string(list.Raw), "before the outage") || !strings.Contains(string(list.Raw), "after the outage") {
		t.Fatalf("tasks after the outage: %d %s", list.Status, list.Raw)
	}
}

func assertDatabaseUnavailable(t *testing.T, what string, r gatewaytest.Response) {
	t.Helper()
	if r.Status != 503 || r.JSON["code"] != "database_unavailable" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("%s during the outage: %d %s (Retry-After %q), want 503 database_unavailable with Retry-After",
			what, r.Status, r.Raw, r.Header.Get("Retry-After"))
	}
}

// cuttableProxy forwards TCP to a target until cut: then it closes every
// connection and stops listening (connect refused) until restored on the
// same address.
type cuttableProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func startCuttableProxy(t *testing.T, target string) *cuttableProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *cuttableProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *cuttableProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// track registers a connection pair, or closes it when a cut came first.
func (p *cuttableProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *cuttableProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *cuttableProxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// postgresAddr is the host:port a test DSN (URL or keyword form) names.
func postgresAddr(t *testing.T, dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Host
	}
	host, port := "127.0.0.1", "5432"
	for _, kv := range strings.Fields(dsn) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "host":
			host = v
		case "port":
			port = v
		}
	}
	if strings.HasPrefix(host, "/") {
		t.Skipf("PostgreSQL on a Unix socket (%s): the outage proxy speaks TCP", host)
	}
	return net.JoinHostPort(host, port)
}

// throughProxy rewrites a DSN to reach PostgreSQL through addr.
func throughProxy(t *testing.T, dsn, addr string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = addr
		return u.String()
	}
	host, port, _ := net.SplitHostPort(addr)
	return dsn + " host=" + host + " port=" + port // later keywords win
}
