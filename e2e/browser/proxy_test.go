package browser

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// cutProxy forwards TCP from a loopback port to the gateway. The browser
// talks to the gateway only through it, so a test can cut every live
// connection (a lost network) and refuse new ones until resumed.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	conns map[net.Conn]struct{}
	// noStreams refuses connections whose first request is the event
	// stream, so a page misses events while its other requests go through.
	noStreams bool
}

func startProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut(false) })
	return p
}

func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		held := p.held
		if !held {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if held {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	in := bufio.NewReader(c)
	p.mu.Lock()
	noStreams := p.noStreams
	p.mu.Unlock()
	if noStreams {
		line, err := in.ReadString('\n')
		if err != nil || strings.Contains(line, "/api/v1/events") {
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
			c.Close()
			return
		}
		in = bufio.NewReader(io.MultiReader(strings.NewReader(line), in))
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, in); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut closes every open connection; with hold, new connections are
// refused (closed at once) until Resume.
func (p *cutProxy) Cut(hold bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = hold
	for c := range p.conns {
		c.Close()
	}
}

// Resume accepts connections again.
func (p *cutProxy) Resume() {
	p.mu.Lock()
	p.held = false
	p.mu.Unlock()
}

// HoldStreams cuts every connection and, until ResumeStreams, refuses new
// connections that open the event stream (the page stops hearing events
// but can still send requests). Browsers reuse idle connections, so a
// stream may get through again once other requests have opened new ones.
func (p *cutProxy) HoldStreams() {
	p.mu.Lock()
	p.noStreams = true
	p.mu.Unlock()
	p.Cut(false)
}

// ResumeStreams lets event streams through again.
func (p *cutProxy) ResumeStreams() {
	p.mu.Lock()
	p.noStreams = false
	p.mu.Unlock()
}
