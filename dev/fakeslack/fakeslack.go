// Package fakeslack is a fake Slack on 127.0.0.1 speaking Slack's real
// wire formats over real HTTP and WebSocket, for tests driven by the real
// slack-go client:
//
//   - the Web API at APIURL(): auth.test, chat.postMessage (form or JSON
//     bodies, 429 with Retry-After on cue) and apps.connections.open;
//   - Socket Mode: the WebSocket apps.connections.open points at, with
//     hello, pings, events_api envelopes that are redelivered
//     (retry_attempt+1) until acknowledged;
//   - the Events API sender: Deliver signs an event_callback like Slack
//     (v0 HMAC-SHA256) and POSTs it to an ingress URL, retrying like Slack
//     after a non-2xx answer or none within the timeout, with
//     X-Slack-Retry-Num and X-Slack-Retry-Reason.
//
// Safe for concurrent use.
package fakeslack

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure the fake.
type Options struct {
	BotToken      string // xoxb-... accepted by the Web API
	AppToken      string // xapp-... accepted by apps.connections.open
	SigningSecret string // signs Events API deliveries
	BotUserID     string // auth.test's user_id (default U0BOT)
	BotID         string // auth.test's bot_id (default B0BOT)
	TeamID        string // default T0FAKE
	// AckTimeout is how long a socket envelope waits for its ack before
	// it is redelivered (default 3s).
	AckTimeout time.Duration
	// MaxRedeliveries bounds the redeliveries of one envelope (default 3,
	// like Slack).
	MaxRedeliveries int
	// AnswerTimeout is how long Deliver waits for an answer before it
	// counts a timeout and retries (default 3s, Slack's).
	AnswerTimeout time.Duration
	// PingInterval is how often the WebSocket is pinged (default 5s).
	PingInterval time.Duration
}

// Post is a message chat.postMessage accepted.
type Post struct {
	Channel  string
	Text     string
	ThreadTS string
	TS       string
	At       time.Time // when the fake accepted it
}

// Server is a running fake Slack.
type Server struct {
	opts Options
	ln   net.Listener
	srv  *http.Server
	http *http.Client

	mu          sync.Mutex
	posts       []Post
	failSends   int
	retryAfter  int
	refused     bool
	refuseChans map[string]string
	tsSeq       int64
	socket      socketState
	closed      chan struct{}
}

// Start listens on 127.0.0.1 and serves until Close.
func Start(opts Options) (*Server, error) {
	if opts.BotUserID == "" {
		opts.BotUserID = "U0BOT"
	}
	if opts.BotID == "" {
		opts.BotID = "B0BOT"
	}
	if opts.TeamID == "" {
		opts.TeamID = "T0FAKE"
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = 3 * time.Second
	}
	if opts.MaxRedeliveries <= 0 {
		opts.MaxRedeliveries = 3
	}
	if opts.AnswerTimeout <= 0 {
		opts.AnswerTimeout = 3 * time.Second
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 5 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts: opts, ln: ln, closed: make(chan struct{}),
		http:        &http.Client{Timeout: opts.AnswerTimeout},
		refuseChans: map[string]string{},
		tsSeq:       time.Now().Unix() * 1_000_000,
	}
	s.socket.init()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/auth.test", s.authTest)
	mux.HandleFunc("POST /api/chat.postMessage", s.postMessage)
	mux.HandleFunc("POST /api/apps.connections.open", s.connectionsOpen)
	mux.HandleFunc("GET /link/", s.serveSocket)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	go s.redeliverLoop()
	return s, nil
}

// APIURL is the Web API root (a channel's api_base_url).
func (s *Server) APIURL() string { return "http://" + s.ln.Addr().String() + "/api/" }

// Close stops the fake and drops its connections.
func (s *Server) Close() {
	select {
	case <-s.closed:
		return
	default:
		close(s.closed)
	}
	s.DropConnections()
	_ = s.srv.Close()
}

// Sent returns the messages chat.postMessage accepted, in order.
func (s *Server) Sent() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// PendingFailures is how many of the 429s FailSends asked for are still
// to be answered.
func (s *Server) PendingFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failSends
}

// FailSends makes the next n chat.postMessage calls answer 429 with
// Retry-After: retryAfter (whole seconds, as Slack sends it).
func (s *Server) FailSends(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSends, s.retryAfter = n, int(retryAfter/time.Second)
}

// RefuseToken makes every later call answer invalid_auth, as Slack does
// for a revoked or wrong token.
func (s *Server) RefuseToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = true
}

// RefuseChannel makes chat.postMessage to channel answer the error code
// (channel_not_found, not_in_channel, is_archived ...).
func (s *Server) RefuseChannel(channel, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseChans[channel] = code
}

// nextTS assigns a unique Slack ts ("seconds.micros").
func (s *Server) nextTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tsSeq++
	return fmt.Sprintf("%d.%06d", s.tsSeq/1_000_000, s.tsSeq%1_000_000)
}

// params reads a Web API request: form or JSON body, token from the form
// or the Authorization header.
func params(r *http.Request) (token string, p map[string]string, err error) {
	p = map[string]string{}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return "", nil, err
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		if len(strings.TrimSpace(string(body))) > 0 {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				return "", nil, err
			}
			for k, v := range m {
				switch v := v.(type) {
				case string:
					p[k] = v
				default:
					b, _ := json.Marshal(v)
					p[k] = string(b)
				}
			}
		}
	default:
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return "", nil, err
		}
		for k := range vals {
			p[k] = vals.Get(k)
		}
	}
	token = p["token"]
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = bearer
	}
	return token, p, nil
}

func answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func slackError(w http.ResponseWriter, code string) {
	answer(w, map[string]any{"ok": false, "error": code})
}

// tokenOK checks the token against want; it answers the error itself.
func (s *Server) tokenOK(w http.ResponseWriter, token, want string) bool {
	s.mu.Lock()
	refused := s.refused
	s.mu.Unlock()
	switch {
	case token == "":
		slackError(w, "not_authed")
	case refused || token != want:
		slackError(w, "invalid_auth")
	default:
		return true
	}
	return false
}

func (s *Server) authTest(w http.ResponseWriter, r *http.Request) {
	token, _, err := params(r)
	if err != nil {
		slackError(w, "invalid_form_data")
		return
	}
	if !s.tokenOK(w, token, s.opts.BotToken) {
		return
	}
	answer(w, map[string]any{
		"ok": true, "url": "https://fake.slack.com/", "team": "Fake Team", "user": "agentry",
		"team_id": s.opts.TeamID, "user_id": s.opts.BotUserID, "bot_id": s.opts.BotID,
	})
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	token, p, err := params(r)
	if err != nil {
		slackError(w, "invalid_form_data")
		return
	}
	if !s.tokenOK(w, token, s.opts.BotToken) {
		return
	}
	s.mu.Lock()
	if s.failSends > 0 {
		s.failSends--
		ra := s.retryAfter
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(ra))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"ok":false,"error":"ratelimited"}`)
		return
	}
	code := s.refuseChans[p["channel"]]
	s.mu.Unlock()
	switch {
	case p["channel"] == "":
		slackError(w, "channel_not_found")
		return
	case code != "":
		slackError(w, code)
		return
	case strings.TrimSpace(p["text"]) == "" && p["blocks"] == "" && p["attachments"] == "":
		slackError(w, "no_text")
		return
	case len([]rune(p["text"])) > 40000:
		slackError(w, "msg_too_long")
		return
	}
	post := Post{Channel: p["channel"], Text: p["text"], ThreadTS: p["thread_ts"], TS: s.nextTS(), At: time.Now()}
	s.mu.Lock()
	s.posts = append(s.posts, post)
	s.mu.Unlock()
	msg := map[string]any{"type": "message", "user": s.opts.BotUserID, "bot_id": s.opts.BotID, "text": post.Text, "ts": post.TS}
	if post.ThreadTS != "" {
		msg["thread_ts"] = post.ThreadTS
	}
	answer(w, map[string]any{"ok": true, "channel": post.Channel, "ts": post.TS, "message": msg})
}

func (s *Server) connectionsOpen(w http.ResponseWriter, r *http.Request) {
	token, _, err := params(r)
	if err != nil {
		slackError(w, "invalid_form_data")
		return
	}
	if !s.tokenOK(w, token, s.opts.AppToken) {
		return
	}
	s.mu.Lock()
	s.socket.tickets++
	n := s.socket.tickets
	s.mu.Unlock()
	answer(w, map[string]any{"ok": true, "url": fmt.Sprintf("ws://%s/link/?ticket=%d&app_id=A0FAKE", s.ln.Addr(), n)})
}
