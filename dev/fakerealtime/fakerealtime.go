// Package fakerealtime is a scripted stand-in for an OpenAI-Realtime-
// compatible voice provider, speaking the real wire protocol on loopback so
// the real client libraries (openai-go's realtime.ClientSecrets, a
// WebSocket client) can be pointed at it by base URL:
//
//	POST /v1/realtime/client_secrets   mint an ephemeral client key (provider key required)
//	GET  /v1/realtime?model=M          the client's WebSocket (Authorization: Bearer <ephemeral key>,
//	                                   or the browser's subprotocol openai-insecure-api-key.<key>)
//	GET  /v1/realtime?call_id=SESSION  a server-side control connection to that session (provider
//	                                   key): every server event of the session is copied to it
//	POST /v1/realtime/calls/{id}/hangup  end the session (provider key)
//
// Client events understood: session.update, input_audio_buffer.append
// (base64 audio), input_audio_buffer.commit, response.create. The fake
// answers a commit with the scripted transcript of the input and a
// response.create with output transcript deltas, audio deltas and
// response.done carrying usage: input audio tokens are the appended bytes
// / BytesPerToken (at least 1), output tokens the transcript's words.
package fakerealtime

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// BytesPerToken is how many bytes of input audio count as one token
// (pcm16 at 24 kHz is 48000 bytes a second: 10 tokens a second).
const BytesPerToken = 4800

// Server is the fake provider.
type Server struct {
	// APIKey is the provider key the mint and control routes require.
	APIKey string
	// Transcript is what the fake "hears" in committed audio.
	Transcript string
	// Reply is the assistant's spoken answer (its transcript).
	Reply string

	mu       sync.Mutex
	srv      *http.Server
	ln       net.Listener
	keys     map[string]*session // ephemeral key -> session
	sessions map[string]*session
	mints    int
}

type session struct {
	id, model string
	expires   time.Time
	clients   []*websocket.Conn
	controls  []*websocket.Conn
	ended     bool
	usage     []Usage
}

// Usage is what one response.done reported.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// New is a fake with a default key, transcript and reply.
func New() *Server {
	return &Server{APIKey: "sk-fake-realtime", Transcript: "hello there", Reply: "Hi! How can I help you today?",
		keys: map[string]*session{}, sessions: map[string]*session{}}
}

// Start listens on addr (127.0.0.1:0 for a free port).
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/realtime/client_secrets", s.mint)
	mux.HandleFunc("GET /v1/realtime", s.socket)
	mux.HandleFunc("POST /v1/realtime/calls/{id}/hangup", s.hangup)
	s.ln, s.srv = ln, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return nil
}

// Close stops the server.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
}

// BaseURL is the API root (http://HOST:PORT/v1).
func (s *Server) BaseURL() string { return "http://" + s.ln.Addr().String() + "/v1" }

// Mints counts the client secrets minted.
func (s *Server) Mints() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mints
}

// Ended reports whether the session was hung up or all its clients left.
func (s *Server) Ended(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	return ok && ss.ended
}

func randomID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": typ, "message": msg}})
}

func (s *Server) providerKey(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+s.APIKey
}

func (s *Server) mint(w http.ResponseWriter, r *http.Request) {
	if !s.providerKey(r) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	var body struct {
		ExpiresAfter struct {
			Seconds int64 `json:"seconds"`
		} `json:"expires_after"`
		Session struct {
			Type  string `json:"type"`
			Model string `json:"model"`
		} `json:"session"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON")
		return
	}
	ttl := body.ExpiresAfter.Seconds
	if ttl <= 0 {
		ttl = 600
	}
	if body.Session.Model == "" {
		body.Session.Model = "gpt-realtime"
	}
	ss := &session{id: randomID("sess_"), model: body.Session.Model, expires: time.Now().Add(time.Duration(ttl) * time.Second)}
	key := randomID("ek_")
	s.mu.Lock()
	s.keys[key], s.sessions[ss.id] = ss, ss
	s.mints++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"value": key, "expires_at": ss.expires.Unix(),
		"session": map[string]any{"id": ss.id, "object": "realtime.session", "type": "realtime", "model": ss.model, "expires_at": ss.expires.Unix()}})
}

func (s *Server) hangup(w http.ResponseWriter, r *http.Request) {
	if !s.providerKey(r) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	s.mu.Lock()
	ss, ok := s.sessions[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no such call")
		return
	}
	s.end(ss, "hangup")
	w.WriteHeader(http.StatusOK)
}

// end closes every connection of a session.
func (s *Server) end(ss *session, why string) {
	s.mu.Lock()
	if ss.ended {
		s.mu.Unlock()
		return
	}
	ss.ended = true
	conns := append(append([]*websocket.Conn(nil), ss.clients...), ss.controls...)
	s.mu.Unlock()
	for _, c := range conns {
		c.Close(websocket.StatusNormalClosure, why)
	}
}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	if callID := r.URL.Query().Get("call_id"); callID != "" {
		s.control(w, r, callID)
		return
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	var proto []string
	for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
		p = strings.TrimSpace(p)
		if k, ok := strings.CutPrefix(p, "openai-insecure-api-key."); ok {
			key = k
			proto = append(proto, "realtime", p)
		}
	}
	s.mu.Lock()
	ss, ok := s.keys[key]
	s.mu.Unlock()
	if !ok || time.Now().After(ss.expires) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid or expired ephemeral key")
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: proto, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(8 << 20)
	s.mu.Lock()
	ss.clients = append(ss.clients, c)
	s.mu.Unlock()
	ctx := r.Context()
	s.send(ctx, ss, c, map[string]any{"type": "session.created", "session": map[string]any{"id": ss.id, "model": ss.model}})
	var audio int
	for {
		var ev map[string]any
		if err := wsjson.Read(ctx, c, &ev); err != nil {
			s.end(ss, "client left")
			return
		}
		switch ev["type"] {
		case "session.update":
			s.send(ctx, ss, c, map[string]any{"type": "session.updated", "session": ev["session"]})
		case "input_audio_buffer.append":
			a, _ := ev["audio"].(string)
			raw, err := base64.StdEncoding.DecodeString(a)
			if err != nil {
				s.send(ctx, ss, c, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "audio is not base64"}})
				continue
			}
			audio += len(raw)
		case "input_audio_buffer.commit":
			item := randomID("item_")
			s.send(ctx, ss, c, map[string]any{"type": "input_audio_buffer.committed", "item_id": item})
			s.send(ctx, ss, c, map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": item, "transcript": s.Transcript})
		case "response.create":
			s.respond(ctx, ss, c, audio)
			audio = 0
		default:
			s.send(ctx, ss, c, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": "unknown event type"}})
		}
	}
}

func (s *Server) respond(ctx context.Context, ss *session, c *websocket.Conn, audio int) {
	rid := randomID("resp_")
	s.send(ctx, ss, c, map[string]any{"type": "response.created", "response": map[string]any{"id": rid, "status": "in_progress"}})
	words := strings.Fields(s.Reply)
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		s.send(ctx, ss, c, map[string]any{"type": "response.output_audio_transcript.delta", "response_id": rid, "delta": w})
		// Silence in pcm16: 100 ms at 24 kHz per word.
		s.send(ctx, ss, c, map[string]any{"type": "response.output_audio.delta", "response_id": rid, "delta": base64.StdEncoding.EncodeToString(make([]byte, 4800))})
	}
	in := max(int64(audio/BytesPerToken), 1)
	u := Usage{InputTokens: in, OutputTokens: int64(len(words)), TotalTokens: in + int64(len(words))}
	s.mu.Lock()
	ss.usage = append(ss.usage, u)
	s.mu.Unlock()
	s.send(ctx, ss, c, map[string]any{"type": "response.done", "response": map[string]any{"id": rid, "status": "completed",
		"usage": map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "total_tokens": u.TotalTokens,
			"input_token_details":  map[string]any{"audio_tokens": u.InputTokens, "text_tokens": 0},
			"output_token_details": map[string]any{"audio_tokens": u.OutputTokens, "text_tokens": 0}}}})
}

// send copies a server event to the session's control connections, then
// writes it to the client (so a client that leaves at once after
// response.done never beats the control connection's copy).
func (s *Server) send(ctx context.Context, ss *session, c *websocket.Conn, ev map[string]any) {
	s.mu.Lock()
	controls := append([]*websocket.Conn(nil), ss.controls...)
	s.mu.Unlock()
	for _, cc := range controls {
		wsjson.Write(ctx, cc, ev)
	}
	wsjson.Write(ctx, c, ev)
}

func (s *Server) control(w http.ResponseWriter, r *http.Request, id string) {
	if !s.providerKey(r) {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
		return
	}
	s.mu.Lock()
	ss, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no such call")
		return
	}
	// Registered under the lock it is accepted under: a client that
	// connects as soon as the gateway's dial returns already has its
	// events copied here.
	s.mu.Lock()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.mu.Unlock()
		return
	}
	ended := ss.ended
	if !ended {
		ss.controls = append(ss.controls, c)
	}
	s.mu.Unlock()
	if ended {
		c.Close(websocket.StatusNormalClosure, "session ended")
		return
	}
	// The control connection only listens; reading keeps it alive until
	// the session ends or the gateway leaves.
	for {
		if _, _, err := c.Read(r.Context()); err != nil {
			return
		}
	}
}

// SessionUsage is every response.done usage the session reported.
func (s *Server) SessionUsage(id string) []Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sessions[id]; ok {
		return append([]Usage(nil), ss.usage...)
	}
	return nil
}
