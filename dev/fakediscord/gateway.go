package fakediscord

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway opcodes (https://discord.com/developers/docs/topics/opcodes-and-status-codes).
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatACK   = 11
)

// closeAuthenticationFailed is the gateway close code for a bad token.
const closeAuthenticationFailed = 4004

// session is a gateway session: its sequence and every dispatch sent in
// it, so a RESUME can replay what a dropped connection missed.
type session struct {
	id   string
	seq  int64
	log  [][]byte // dispatch frames, log[i] has s = i+1
	conn *gwConn
}

type gwConn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	sess *session
}

func (c *gwConn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, frame)
}

func (c *gwConn) closeWith(code int, text string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	_ = c.ws.Close()
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func frame(op int, d any) []byte {
	b, _ := json.Marshal(map[string]any{"op": op, "d": d, "s": nil, "t": nil})
	return b
}

// gateway serves one WebSocket connection.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.conns[c] = true
	s.mu.Unlock()
	defer s.detach(c)

	if c.write(frame(opHello, map[string]any{"heartbeat_interval": s.heartbeatMS})) != nil {
		return
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			// A client that closes with 1000/1001 ends its session
			// (Discord's rule); a dropped socket keeps it resumable.
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				s.endSession(c)
			}
			return
		}
		var p payload
		if json.Unmarshal(data, &p) != nil {
			c.closeWith(4002, "Error while decoding payload.")
			return
		}
		switch p.Op {
		case opHeartbeat:
			s.mu.Lock()
			s.heartbeats++
			s.mu.Unlock()
			if c.write(frame(opHeartbeatACK, nil)) != nil {
				return
			}
		case opIdentify:
			var d struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			_ = json.Unmarshal(p.D, &d)
			if !s.validToken(d.Token) {
				c.closeWith(closeAuthenticationFailed, "Authentication failed.")
				return
			}
			s.identify(c, d.Intents)
		case opResume:
			var d struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int64  `json:"seq"`
			}
			_ = json.Unmarshal(p.D, &d)
			if !s.validToken(d.Token) {
				c.closeWith(closeAuthenticationFailed, "Authentication failed.")
				return
			}
			if !s.resume(c, d.SessionID, d.Seq) {
				if c.write(frame(opInvalidSession, false)) != nil {
					return
				}
			}
		default:
			c.closeWith(4001, "Unknown opcode.")
			return
		}
	}
}

func (s *Server) validToken(t string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimPrefix(t, "Bot ") == s.token
}

func (s *Server) identify(c *gwConn, intents int) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.identifies++
	s.intents = intents
	sess := &session{id: hex.EncodeToString(b[:]), conn: c}
	if c.sess != nil && c.sess.conn == c {
		c.sess.conn = nil
	}
	c.sess = sess
	s.sessions[sess.id] = sess
	s.dispatch(sess, "READY", map[string]any{
		"v": 9, "session_id": sess.id, "resume_gateway_url": s.GatewayURL(),
		"user":        map[string]any{"id": s.botID, "username": s.botName, "discriminator": "0", "bot": true},
		"guilds":      []any{},
		"application": map[string]any{"id": s.botID, "flags": 0},
	})
}

// resume replays the session's dispatches after seq on c, then RESUMED.
func (s *Server) resume(c *gwConn, id string, seq int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok || seq > sess.seq {
		return false
	}
	s.resumes++
	if sess.conn != nil && sess.conn != c {
		_ = sess.conn.ws.UnderlyingConn().Close()
	}
	sess.conn, c.sess = c, sess
	for _, f := range sess.log[seq:] {
		_ = c.write(f)
	}
	s.dispatch(sess, "RESUMED", map[string]any{})
	return true
}

// dispatchAll sends an event to every session. Caller holds mu.
func (s *Server) dispatchAll(t string, d any) {
	for _, sess := range s.sessions {
		s.dispatch(sess, t, d)
	}
}

// dispatch numbers an event in a session, logs it and writes it when
// the session is connected. Caller holds mu.
func (s *Server) dispatch(sess *session, t string, d any) {
	sess.seq++
	f, _ := json.Marshal(map[string]any{"op": opDispatch, "t": t, "s": sess.seq, "d": d})
	sess.log = append(sess.log, f)
	if sess.conn != nil {
		if sess.conn.write(f) != nil {
			sess.conn = nil
		}
	}
}

// detach forgets a closed connection; its session stays resumable.
func (s *Server) detach(c *gwConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if c.sess != nil && c.sess.conn == c {
		c.sess.conn = nil
	}
	_ = c.ws.Close()
}

func (s *Server) endSession(c *gwConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.sess != nil {
		delete(s.sessions, c.sess.id)
	}
}

// DropConnections closes every gateway socket without a close frame, as
// a network failure would: the sessions stay resumable.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.ws.UnderlyingConn().Close()
		if c.sess != nil && c.sess.conn == c {
			c.sess.conn = nil
		}
	}
}

// Connected counts gateway sessions with a live connection.
func (s *Server) Connected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sess := range s.sessions {
		if sess.conn != nil {
			n++
		}
	}
	return n
}

// InvalidateSessions forgets every gateway session (as Discord does
// after a long outage): the next RESUME is answered with op 9 and the
// client must identify again; nothing missed meanwhile is replayed.
func (s *Server) InvalidateSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		if sess.conn != nil {
			sess.conn.sess = nil
		}
		delete(s.sessions, id)
	}
}
