package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// socketState is the Socket Mode side: open connections and envelopes
// awaiting their ack. Guarded by Server.mu.
type socketState struct {
	tickets int
	conns   map[*wsConn]struct{}
	envs    map[string]*envelope
	order   []string
	seq     int
	kick    chan struct{}
}

func (st *socketState) init() {
	st.conns = map[*wsConn]struct{}{}
	st.envs = map[string]*envelope{}
	st.kick = make(chan struct{}, 1)
}

type envelope struct {
	id       string
	payload  json.RawMessage
	attempts int // deliveries made
	sentAt   time.Time
	acked    bool
	gaveUp   bool
	done     chan struct{} // closed when acked or given up
}

type wsConn struct {
	c   *websocket.Conn
	wmu sync.Mutex // gorilla allows one writer at a time
}

func (c *wsConn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.c.WriteJSON(v)
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// serveSocket is the Socket Mode WebSocket: hello, pings, envelopes out,
// acks in.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	conn := &wsConn{c: c}
	s.mu.Lock()
	s.socket.conns[conn] = struct{}{}
	n := len(s.socket.conns)
	s.mu.Unlock()
	defer s.dropConn(conn)
	hello := map[string]any{
		"type": "hello", "num_connections": n,
		"debug_info":      map[string]any{"host": "fakeslack", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": "A0FAKE"},
	}
	if conn.write(hello) != nil {
		return
	}
	s.kickDispatch()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(s.opts.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second)) != nil {
					return
				}
			}
		}
	}()
	// The client answers pings and sends acks; a first ping right away
	// keeps its dead-man timer from firing before the ticker does.
	_ = c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second))
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		if e := s.socket.envs[ack.EnvelopeID]; e != nil && !e.acked {
			e.acked = true
			if !e.gaveUp {
				close(e.done)
			}
		}
		s.mu.Unlock()
	}
}

func (s *Server) dropConn(c *wsConn) {
	s.mu.Lock()
	delete(s.socket.conns, c)
	s.mu.Unlock()
	_ = c.c.Close()
}

func (s *Server) kickDispatch() {
	select {
	case s.socket.kick <- struct{}{}:
	default:
	}
}

// Push queues ev as an events_api envelope for Socket Mode and returns its
// envelope_id. It is sent to a connected client (when one connects, if
// none is) and redelivered every AckTimeout until acknowledged, at most
// MaxRedeliveries times.
func (s *Server) Push(ev Event) string {
	s.mu.Lock()
	s.socket.seq++
	id := fmt.Sprintf("env-%06d-%s", s.socket.seq, ev.ID)
	s.socket.envs[id] = &envelope{id: id, payload: s.Callback(ev), done: make(chan struct{})}
	s.socket.order = append(s.socket.order, id)
	s.mu.Unlock()
	s.kickDispatch()
	return id
}

// EnvelopeState is what became of a pushed envelope.
type EnvelopeState struct {
	Deliveries int  // times sent (1 + redeliveries)
	Acked      bool // the client acknowledged it
	GaveUp     bool // redeliveries exhausted without an ack
}

// Envelope returns the state of a pushed envelope.
func (s *Server) Envelope(id string) EnvelopeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.socket.envs[id]
	if e == nil {
		return EnvelopeState{}
	}
	return EnvelopeState{Deliveries: e.attempts, Acked: e.acked, GaveUp: e.gaveUp}
}

// WaitAcked waits until the envelope is acknowledged (ErrNotAcked when
// ctx ends or redeliveries ran out first).
func (s *Server) WaitAcked(ctx context.Context, id string) error {
	s.mu.Lock()
	e := s.socket.envs[id]
	s.mu.Unlock()
	if e == nil {
		return fmt.Errorf("fakeslack: no envelope %s", id)
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return ErrNotAcked
	}
	if st := s.Envelope(id); !st.Acked {
		return ErrNotAcked
	}
	return nil
}

// Connections is the number of open Socket Mode connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.socket.conns)
}

// Disconnect sends Slack's "disconnect" (refresh_requested) on every
// connection: clients are expected to open a new one.
func (s *Server) Disconnect() {
	for _, c := range s.connList() {
		_ = c.write(map[string]any{"type": "disconnect", "reason": "refresh_requested", "debug_info": map[string]any{"host": "fakeslack"}})
	}
}

// DropConnections closes every Socket Mode connection abruptly.
func (s *Server) DropConnections() {
	for _, c := range s.connList() {
		_ = c.c.Close()
	}
}

func (s *Server) connList() []*wsConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []*wsConn
	for c := range s.socket.conns {
		cs = append(cs, c)
	}
	return cs
}

// redeliverLoop sends due envelopes: new ones at once, unacknowledged ones
// again after AckTimeout with retry_attempt and retry_reason "timeout".
func (s *Server) redeliverLoop() {
	tick := time.NewTicker(max(s.opts.AckTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-tick.C:
		case <-s.socket.kick:
		}
		s.dispatch()
	}
}

type outgoing struct {
	conn *wsConn
	msg  map[string]any
}

func (s *Server) dispatch() {
	now := time.Now()
	var out []outgoing
	s.mu.Lock()
	var conn *wsConn
	for c := range s.socket.conns {
		conn = c
		break
	}
	for _, id := range s.socket.order {
		e := s.socket.envs[id]
		if e.acked || e.gaveUp {
			continue
		}
		if e.attempts > 0 && now.Sub(e.sentAt) < s.opts.AckTimeout {
			continue
		}
		if e.attempts > s.opts.MaxRedeliveries {
			e.gaveUp = true
			close(e.done)
			continue
		}
		if conn == nil {
			continue
		}
		reason := ""
		if e.attempts > 0 {
			reason = "timeout"
		}
		out = append(out, outgoing{conn, map[string]any{
			"envelope_id": e.id, "type": "events_api", "payload": e.payload,
			"accepts_response_payload": false, "retry_attempt": e.attempts, "retry_reason": reason,
		}})
		e.attempts++
		e.sentAt = now
	}
	s.mu.Unlock()
	for _, o := range out {
		if o.conn.write(o.msg) != nil {
			_ = o.conn.c.Close()
		}
	}
}
