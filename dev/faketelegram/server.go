// Package faketelegram is a fake Telegram Bot API server on 127.0.0.1
// (real HTTP) that speaks the real wire format, so tests drive it with a
// real client library: {"ok":true,"result":...} on success and
// {"ok":false,"error_code":N,"description":"...","parameters":{...}} with
// the same HTTP status on failure, at {url}/bot{token}/{method}.
//
// It implements what a bot that answers messages uses: getMe, getUpdates
// (long polling with real offset semantics), setWebhook / deleteWebhook /
// getWebhookInfo (with a webhook set it POSTs each update to the url with
// the X-Telegram-Bot-Api-Secret-Token header and redelivers until a 2xx,
// like Telegram) and sendMessage. Tests add incoming messages, read what
// the bot sent and inject 429 storms.
package faketelegram

import (
	"context"
	"encoding/json"
	"errors"
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

// DefaultToken is the token Start uses when given none. It has the shape
// of a real token (digits, colon, 35 characters) because client libraries
// check it.
const DefaultToken = "123456789:AAFakeTelegramTokenForAgentryTests0"

// Server is a running fake. Its own methods act on the first token's bot;
// BotOf(token) reaches the others.
type Server struct {
	*Bot
	ln   net.Listener
	srv  *http.Server
	bots map[string]*Bot
	// client delivers webhooks.
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 (a free port) and serves one bot per token
// (DefaultToken when none is given). A token's bot id is its digits
// before the colon.
func Start(tokens ...string) (*Server, error) { return Listen("127.0.0.1:0", tokens...) }

// Listen is Start on a given address (dev/cmd/fake-telegram).
func Listen(addr string, tokens ...string) (*Server, error) {
	if len(tokens) == 0 {
		tokens = []string{DefaultToken}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{ln: ln, bots: map[string]*Bot{}, client: &http.Client{Timeout: 10 * time.Second}, ctx: ctx, cancel: cancel}
	for i, tok := range tokens {
		id, err := strconv.ParseInt(strings.SplitN(tok, ":", 2)[0], 10, 64)
		if err != nil || !strings.Contains(tok, ":") {
			cancel()
			ln.Close()
			return nil, fmt.Errorf("faketelegram: token %d is not <digits>:<secret>", i)
		}
		b := newBot(s, id, fmt.Sprintf("agentry%d_bot", i+1))
		s.bots[tok] = b
		if i == 0 {
			s.Bot = b
		}
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the api_base_url to configure ({url}/bot{token}/{method}).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// BotOf returns the bot of a token (nil when unknown).
func (s *Server) BotOf(token string) *Bot { return s.bots[token] }

// Close stops the server, ending long polls and webhook deliveries.
func (s *Server) Close() {
	s.cancel()
	for _, b := range s.bots {
		b.mu.Lock()
		b.wakeLocked()
		b.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	s.wg.Wait()
}

// apiError is a Telegram error answer.
type apiError struct {
	code       int
	desc       string
	retryAfter int
}

func reply(w http.ResponseWriter, result any, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if e != nil {
		body := map[string]any{"ok": false, "error_code": e.code, "description": e.desc}
		if e.retryAfter > 0 {
			body["parameters"] = map[string]any{"retry_after": e.retryAfter}
		}
		w.WriteHeader(e.code)
		json.NewEncoder(w).Encode(body)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_fake/") {
		s.control(w, r)
		return
	}
	// /bot{token}/{method}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	tok, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || method == "" {
		reply(w, nil, &apiError{code: 404, desc: "Not Found"})
		return
	}
	b := s.bots[tok]
	if b == nil {
		reply(w, nil, &apiError{code: 401, desc: "Unauthorized"})
		return
	}
	p, err := readParams(r)
	if err != nil {
		reply(w, nil, &apiError{code: 400, desc: "Bad Request: " + err.Error()})
		return
	}
	b.mu.Lock()
	b.calls[method]++
	b.mu.Unlock()
	var result any
	var e *apiError
	switch method {
	case "getMe":
		result = b.me()
	case "getUpdates":
		result, e = b.getUpdates(r.Context(), p)
	case "setWebhook":
		result, e = b.setWebhook(p)
	case "deleteWebhook":
		result, e = b.deleteWebhook(p)
	case "getWebhookInfo":
		result = b.webhookInfo()
	case "sendMessage":
		result, e = b.sendMessage(p)
	default:
		e = &apiError{code: 404, desc: "Not Found: method not found"}
	}
	reply(w, result, e)
}

// params are a request's parameters, from the query string, a form or a
// JSON body, each kept as JSON (form values that are not JSON become
// JSON strings), as Telegram accepts all three.
type params map[string]json.RawMessage

func readParams(r *http.Request) (params, error) {
	p := params{}
	addValues := func(vals url.Values) {
		for k, vs := range vals {
			if len(vs) == 0 {
				continue
			}
			v := vs[0]
			if json.Valid([]byte(v)) && !isBareWord(v) {
				p[k] = json.RawMessage(v)
			} else {
				q, _ := json.Marshal(v)
				p[k] = q
			}
		}
	}
	addValues(r.URL.Query())
	if r.Body == nil {
		return p, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return p, nil
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, errors.New("can't parse JSON object")
		}
		for k, v := range m {
			p[k] = v
		}
	case "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, errors.New("can't parse form")
		}
		addValues(vals)
	default:
		return nil, fmt.Errorf("unsupported content type %q", ct)
	}
	return p, nil
}

// isBareWord keeps "true"/"null" style words strings only when they
// are not meant as JSON; numbers and objects pass as JSON.
func isBareWord(v string) bool { return v == "null" }

func (p params) str(key string) string {
	raw, ok := p[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func (p params) int(key string) (int64, bool) {
	raw, ok := p[key]
	if !ok {
		return 0, false
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

func (p params) bool(key string) bool {
	raw, ok := p[key]
	if !ok {
		return false
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b
	}
	return p.str(key) == "true"
}

func (p params) strings(key string) []string {
	raw, ok := p[key]
	if !ok {
		return nil
	}
	var out []string
	if json.Unmarshal(raw, &out) == nil {
		return out
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && json.Unmarshal([]byte(s), &out) == nil {
		return out
	}
	return nil
}

// object decodes a parameter that is a JSON object (sent either as an
// object or, in forms, as a JSON-serialized string).
func (p params) object(key string, v any) bool {
	raw, ok := p[key]
	if !ok {
		return false
	}
	if json.Unmarshal(raw, v) == nil {
		return true
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && json.Unmarshal([]byte(s), v) == nil
}
