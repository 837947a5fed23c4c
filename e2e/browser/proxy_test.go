package browser

import (
	"io"
	"net"
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
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
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
