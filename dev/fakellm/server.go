// Package fakellm is a scripted stand-in for LLM providers. It speaks the real wire formats the
// gateway's clients use (OpenAI chat completions, Anthropic Messages, Ollama chat), streaming and
// usage included, and their embeddings APIs (OpenAI /v1/embeddings, Ollama /api/embed; see
// EmbedText), on one port, so the gateway can be tested and tried end to end without a model.
//
// Without a script it answers "echo: <last user message>" with plausible usage. Rules (from Go or
// over HTTP at /_fake/script) make it reply with text or tool calls, fail with a status and
// Retry-After, answer slowly, cut streams, and report custom or no usage. Every call is recorded
// (/_fake/calls). Model names can carry behaviour without a script: "slow-200ms", "fail-503",
// "cut-2".
package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxRecords is how many call records are kept (the oldest are dropped); CallCount counts all.
const MaxRecords = 10000

// maxBody bounds a request body.
const maxBody = 32 << 20

// maxRecordedBody bounds the request body kept in a record.
const maxRecordedBody = 64 << 10

// CallRecord is what the fake remembers about one received call.
type CallRecord struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Path   string    `json:"path"`
	Format string    `json:"format"` // openai | anthropic | ollama
	Model  string    `json:"model"`
	Stream bool      `json:"stream"`
	// LastUserMessage is the text of the last user message.
	LastUserMessage string `json:"last_user_message"`
	// MessagesDigest is "sha256:<hex>" of the whole message list (system prompt, tool calls and
	// results included) in a format-neutral form: the same conversation gives the same digest in
	// every wire format.
	MessagesDigest string   `json:"messages_digest"`
	MessageCount   int      `json:"message_count"`
	Tools          []string `json:"tools,omitempty"`
	MaxTokens      int      `json:"max_tokens,omitempty"`
	// Auth names how credentials came: "bearer", "x-api-key" or "" (none); KeyHint is the key's last
	// four characters, enough to tell test keys apart without keeping secrets.
	Auth    string `json:"auth,omitempty"`
	KeyHint string `json:"key_hint,omitempty"`
	// Rule is the index of the script rule that answered, -1 for the default answer.
	Rule int `json:"rule"`
	// Status is the HTTP status sent (0 while the call is in progress or when the connection was
	// closed without an answer).
	Status int `json:"status"`
	// Cut is set when the stream (or connection) was cut by script.
	Cut       bool   `json:"cut,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Inputs is the number of texts of an embeddings call (LastUserMessage
	// is then the first of them).
	Inputs int `json:"inputs,omitempty"`
	// Body is the raw request body when it was valid JSON of at most 64 KiB.
	Body json.RawMessage `json:"body,omitempty"`
}

// Server is the fake provider. The zero value is not usable; call New.
type Server struct {
	mu      sync.Mutex
	rules   []*ruleState
	records []*CallRecord
	seq     int64
	logger  *slog.Logger

	srv *http.Server
	ln  net.Listener
	url string
}

type ruleState struct {
	Rule
	Used int `json:"used"`
}

// New returns a server with no script.
func New() *Server {
	return &Server{logger: slog.New(slog.DiscardHandler)}
}

// SetLogger makes the server log every call at debug level.
func (s *Server) SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	s.mu.Lock()
	s.logger = l
	s.mu.Unlock()
}

// Start listens on addr ("127.0.0.1:0" or ":0" for a free port; "" means 127.0.0.1:0) and serves in
// the background until Close.
func (s *Server) Start(addr string) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("fake llm: listen on %s: %w", addr, err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	s.ln = ln
	s.url = "http://" + net.JoinHostPort(host, port)
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return nil
}

// URL is the base URL, e.g. http://127.0.0.1:41234. Clients use URL()+"/v1" as the OpenAI base URL
// and URL() as the Anthropic and Ollama base URL.
func (s *Server) URL() string { return s.url }

// OpenAIBaseURL is URL()+"/v1", the base URL an OpenAI-compatible client is configured with.
func (s *Server) OpenAIBaseURL() string { return s.url + "/v1" }

// Close stops the server at once, breaking calls in progress.
func (s *Server) Close() {
	if s.srv != nil {
		_ = s.srv.Close()
	}
}

// Shutdown stops accepting calls and waits for those in progress (until ctx ends).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

// Run serves the fake on addr until ctx ends; it backs `go run ./dev/cmd/fake-llm --addr ...`.
func Run(ctx context.Context, addr string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := New()
	s.SetLogger(logger)
	if err := s.Start(addr); err != nil {
		return err
	}
	logger.Info("fake LLM provider listening",
		"url", s.URL(),
		"openai_base_url", s.OpenAIBaseURL(),
		"anthropic_base_url", s.URL(),
		"ollama_base_url", s.URL(),
		"script", s.URL()+"/_fake/script",
		"calls", s.URL()+"/_fake/calls")
	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(shutdownCtx); err != nil {
		s.Close()
	}
	logger.Info("fake LLM provider stopped", "calls", s.CallCount())
	return nil
}

// Script replaces the rules.
func (s *Server) Script(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = s.rules[:0]
	for _, r := range rules {
		s.rules = append(s.rules, &ruleState{Rule: r})
	}
}

// AddRules appends rules after the existing ones.
func (s *Server) AddRules(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rules {
		s.rules = append(s.rules, &ruleState{Rule: r})
	}
}

// Reset drops the rules and the call records.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules, s.records, s.seq = nil, nil, 0
}

// Calls returns copies of the kept call records, oldest first.
func (s *Server) Calls() []CallRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.records[max(0, len(s.records)-MaxRecords):]
	out := make([]CallRecord, len(kept))
	for i, r := range kept {
		out[i] = *r
	}
	return out
}

// CallCount is the number of provider calls received since start or Reset.
func (s *Server) CallCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.seq)
}

// Handler serves the fake's routes; Start uses it, and tests may mount it elsewhere.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.serveProvider(openAIFormat{}))
	mux.HandleFunc("POST /v1/messages", s.serveProvider(anthropicFormat{}))
	mux.HandleFunc("POST /api/chat", s.serveProvider(ollamaFormat{}))
	mux.HandleFunc("POST /v1/embeddings", s.serveEmbeddings(embedFormat{format: "openai", errs: openAIFormat{}}))
	mux.HandleFunc("POST /api/embed", s.serveEmbeddings(embedFormat{format: "ollama", errs: ollamaFormat{}}))
	mux.HandleFunc("GET /api/tags", s.serveTags)
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "0.0.0-fake"})
	})
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "Ollama is running") // what Ollama answers; probes rely on it
	})
	mux.HandleFunc("POST /_fake/script", s.serveScript)
	mux.HandleFunc("GET /_fake/script", s.serveGetScript)
	mux.HandleFunc("GET /_fake/calls", s.serveCalls)
	mux.HandleFunc("POST /_fake/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	return mux
}

// wireFormat is one provider API the fake speaks.
type wireFormat interface {
	name() string
	requestIDHeader() string
	parse(r *http.Request, body []byte) (*conversation, error)
	errorBody(status int, msg string) any
	reply(w http.ResponseWriter, c *conversation, a *answer, seq int64)
	stream(e *eventWriter, c *conversation, a *answer, seq int64) (complete bool)
}

func (s *Server) serveProvider(f wireFormat) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			return
		}
		if len(body) > maxBody {
			writeJSON(w, http.StatusRequestEntityTooLarge, f.errorBody(413, "request too large"))
			return
		}
		conv, perr := f.parse(r, body)
		rec := &CallRecord{Time: time.Now().UTC(), Path: r.URL.Path, Format: f.name(), Rule: -1}
		rec.Auth, rec.KeyHint = authOf(r)
		if conv != nil {
			rec.Model, rec.Stream, rec.LastUserMessage = conv.model, conv.stream, conv.lastUser
			rec.MessagesDigest, rec.MessageCount = conv.digest(), len(conv.messages)
			rec.Tools, rec.MaxTokens = conv.tools, conv.maxTokens
		}
		if len(body) <= maxRecordedBody && json.Valid(body) {
			rec.Body = body
		}
		rule, seq, logger := s.admit(rec, conv)
		if h := f.requestIDHeader(); h != "" {
			w.Header().Set(h, rec.RequestID)
		}
		if perr != nil {
			s.finish(rec, http.StatusBadRequest, false)
			writeJSON(w, http.StatusBadRequest, f.errorBody(400, perr.Error()))
			return
		}
		a := plan(rule, conv, seq)
		logger.Debug("fake llm call", "seq", seq, "format", f.name(), "model", conv.model, "stream", conv.stream, "rule", rec.Rule)

		if d := time.Duration(a.rule.Delay); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				s.finish(rec, 0, false)
				return
			}
		}
		for k, v := range a.rule.Headers {
			w.Header().Set(k, v)
		}
		if a.rule.Status >= 400 {
			if a.rule.RetryAfter != "" {
				w.Header().Set("Retry-After", a.rule.RetryAfter)
			}
			s.finish(rec, a.rule.Status, false)
			if a.rule.Body != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(a.rule.Status)
				_, _ = io.WriteString(w, a.rule.Body)
				return
			}
			msg := a.rule.Message
			if msg == "" {
				msg = fmt.Sprintf("fake %s error %d", f.name(), a.rule.Status)
			}
			if a.rule.EchoAuth {
				msg += fmt.Sprintf(" (Incorrect API key provided: Authorization %q, x-api-key %q)", r.Header.Get("Authorization"), r.Header.Get("x-api-key"))
			}
			writeJSON(w, a.rule.Status, f.errorBody(a.rule.Status, msg))
			return
		}
		if !conv.stream {
			if a.cut() {
				s.finish(rec, 0, true)
				panic(http.ErrAbortHandler) // closes the connection without an answer
			}
			s.finish(rec, http.StatusOK, false)
			f.reply(w, conv, a, seq)
			return
		}
		e := newEventWriter(w, r, a)
		s.finish(rec, http.StatusOK, a.cut())
		if !f.stream(e, conv, a, seq) && e.cutNow {
			// Abort the handler so the connection is closed without the terminating chunk: the client
			// sees a broken stream, as when a provider connection drops.
			panic(http.ErrAbortHandler)
		}
	}
}

// admit records the call and picks the rule that answers it (under one lock, so concurrent calls
// consume Times exactly).
func (s *Server) admit(rec *CallRecord, conv *conversation) (Rule, int64, *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	rec.Seq = s.seq
	// Set under the lock: Calls() may copy the record concurrently.
	rec.RequestID = fmt.Sprintf("req_fake_%d", s.seq)
	s.records = append(s.records, rec)
	if len(s.records) > MaxRecords+MaxRecords/4 { // trim in batches, not on every call
		s.records = append(s.records[:0:0], s.records[len(s.records)-MaxRecords:]...)
	}
	var rule Rule
	if conv != nil {
		rule = ruleFromModel(conv.model)
		for i, rs := range s.rules {
			if rs.Times > 0 && rs.Used >= rs.Times {
				continue
			}
			if rs.matches(conv) {
				rs.Used++
				rec.Rule = i
				rule = rs.Rule
				break
			}
		}
	}
	return rule, rec.Seq, s.logger
}

func (s *Server) finish(rec *CallRecord, status int, cut bool) {
	s.mu.Lock()
	rec.Status, rec.Cut = status, cut
	s.mu.Unlock()
}

func authOf(r *http.Request) (kind, hint string) {
	key := ""
	if v := r.Header.Get("x-api-key"); v != "" {
		kind, key = "x-api-key", v
	} else if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		kind, key = "bearer", v
	}
	if len(key) > 4 {
		hint = key[len(key)-4:]
	}
	return kind, hint
}

// ScriptRequest is the body of POST /_fake/script: the rules, appended to the existing ones when
// Append is set, otherwise replacing them. A bare JSON array of rules is accepted too.
type ScriptRequest struct {
	Rules  []Rule `json:"rules"`
	Append bool   `json:"append,omitempty"`
}

func (s *Server) serveScript(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	var req ScriptRequest
	trimmed := strings.TrimSpace(string(raw))
	if strings.HasPrefix(trimmed, "[") {
		err = json.Unmarshal(raw, &req.Rules)
	} else {
		dec := json.NewDecoder(strings.NewReader(trimmed))
		dec.DisallowUnknownFields() // a misspelt field would silently script something else
		err = dec.Decode(&req)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "script: " + err.Error()})
		return
	}
	if v := r.URL.Query().Get("append"); v != "" {
		req.Append, _ = strconv.ParseBool(v)
	}
	if req.Append {
		s.AddRules(req.Rules...)
	} else {
		s.Script(req.Rules...)
	}
	s.mu.Lock()
	n := len(s.rules)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"rules": n})
}

func (s *Server) serveGetScript(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	rules := make([]ruleState, len(s.rules))
	for i, r := range s.rules {
		rules[i] = *r
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"rules": rules})
}

// CallsResponse is the body of GET /_fake/calls.
type CallsResponse struct {
	Count int          `json:"count"`
	Calls []CallRecord `json:"calls"`
}

// serveCalls lists the records; ?since=<seq> keeps only later calls.
func (s *Server) serveCalls(w http.ResponseWriter, r *http.Request) {
	var since int64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "since: not an integer"})
			return
		}
		since = n
	}
	calls := s.Calls()
	out := calls[:0]
	for _, c := range calls {
		if c.Seq > since {
			out = append(out, c)
		}
	}
	writeJSON(w, http.StatusOK, CallsResponse{Count: s.CallCount(), Calls: out})
}

func (s *Server) serveTags(w http.ResponseWriter, _ *http.Request) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	model := func(name, family, size string) map[string]any {
		return map[string]any{
			"name": name, "model": name, "modified_at": now, "size": 2019393189,
			"digest": "fake0000000000000000000000000000000000000000000000000000000000",
			"details": map[string]any{
				"parent_model": "", "format": "gguf", "family": family, "families": []string{family},
				"parameter_size": size, "quantization_level": "Q4_K_M",
			},
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": []any{
		model("llama3.2:latest", "llama", "3.2B"),
		model("qwen2.5:7b", "qwen2", "7.6B"),
	}})
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	data := []any{}
	for _, id := range []string{"gpt-4o-mini", "gpt-4o", "claude-sonnet-4-5", "llama3.2"} {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "fakellm"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
