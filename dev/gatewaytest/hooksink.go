package gatewaytest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
)

// HookSink is a local receiver for the gateway's outgoing hooks and channel
// deliveries: it answers 204 and keeps every body, so a test can look for
// what was sent (e.g. a secret that must not be).
type HookSink struct {
	// URL is where the sink listens, with the path /hook.
	URL string

	mu     sync.Mutex
	bodies [][]byte
	srv    *http.Server
}

// NewHookSink listens on a free loopback port; Close stops it.
func NewHookSink() (*HookSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &HookSink{URL: "http://" + ln.Addr().String() + "/hook"}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go h.srv.Serve(ln)
	return h, nil
}

// Close stops the sink.
func (h *HookSink) Close() { h.srv.Close() }

// All is every body received, joined by newlines.
func (h *HookSink) All() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Join(h.bodies, []byte("\n"))
}

// Count is the number of bodies received.
func (h *HookSink) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies)
}
