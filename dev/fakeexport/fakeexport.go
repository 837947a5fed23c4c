// Package fakeexport is a scripted stand-in for the providers' usage and
// cost export APIs (admin APIs), for tests and for a person trying
// reconciliation without a real organization. One server speaks both
// providers' real shapes:
//
//   - OpenAI: GET /v1/organization/costs (daily buckets, amount.value in USD,
//     group_by=line_item) and GET /v1/organization/usage/completions
//     (group_by=model: input_tokens, output_tokens, input_cached_tokens,
//     num_model_requests); Authorization: Bearer <admin key>.
//   - Anthropic: GET /v1/organizations/cost_report (group_by[]=description:
//     amount as a decimal string in cents, model, description) and GET
//     /v1/organizations/usage_report/messages (group_by[]=model:
//     uncached_input_tokens, cache_read_input_tokens, cache_creation,
//     output_tokens); x-api-key: <admin key>.
//
// Both paginate over day buckets with `limit`, `page`, `has_more` and
// `next_page`. Lines are added per day and model with AddCost / AddUsage;
// Fail scripts the next answers (401, 429, 500 or malformed JSON). Every
// request is counted (Requests) and the credentials each carried are
// checked against Key.
package fakeexport

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Line is one cost line of a day: model, line item ("gpt-4o-mini, input" /
// "Claude Haiku Usage - Output Tokens") and its amount in USD.
type Line struct {
	// Provider ("openai" or "anthropic") limits the line to that
	// provider's endpoints; empty serves it on both.
	Provider string
	Model    string
	LineItem string
	USD      float64
}

// Usage is one model's token usage of a day.
type Usage struct {
	// Provider: as Line.Provider.
	Provider                string
	Model                   string
	InputTokens             int64 // uncached input
	CachedInputTokens       int64
	OutputTokens            int64
	Requests                int64
	CacheCreationInputToken int64
}

// Failure is a scripted answer: Status (401, 429, 500, ...) with an error
// body, or Malformed for a 200 whose body is not JSON. The zero Failure
// answers normally (to let some requests through first).
type Failure struct {
	Status    int
	Malformed bool
	// Body replaces the error body (to test that error texts are scrubbed).
	Body string
}

// Server is the fake export API.
type Server struct {
	// Key is the admin key the server accepts ("" accepts any).
	Key string
	// PageSize, when set, puts at most this many results on a page (one
	// day's bucket then spans pages); otherwise pages hold `limit` buckets.
	PageSize int

	mu       sync.Mutex
	costs    map[string][]Line  // day -> lines
	usage    map[string][]Usage // day -> usage
	failures []Failure
	requests int
	paths    []string
	srv      *http.Server
	ln       net.Listener
}

// New returns a server with no data.
func New(key string) *Server {
	return &Server{Key: key, costs: map[string][]Line{}, usage: map[string][]Usage{}}
}

// Start listens on addr ("127.0.0.1:0" for any port).
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return nil
}

// URL is the base URL (no trailing slash); both providers' base_url.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
}

// AddCost adds cost lines to a day (YYYY-MM-DD).
func (s *Server) AddCost(day string, lines ...Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.costs[day] = append(s.costs[day], lines...)
}

// AddUsage adds usage rows to a day.
func (s *Server) AddUsage(day string, rows ...Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage[day] = append(s.usage[day], rows...)
}

// Reset drops all data and scripted failures.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.costs, s.usage, s.failures = map[string][]Line{}, map[string][]Usage{}, nil
}

// Fail queues answers for the next requests, in order.
func (s *Server) Fail(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f...)
}

// Requests is how many requests arrived.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Paths are the request paths with their queries, in arrival order.
func (s *Server) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.paths = append(s.paths, r.URL.RequestURI())
	var fail *Failure
	if len(s.failures) > 0 {
		f := s.failures[0]
		s.failures = s.failures[1:]
		fail = &f
	}
	s.mu.Unlock()

	anthropic := strings.HasPrefix(r.URL.Path, "/v1/organizations/")
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if anthropic {
		key = r.Header.Get("x-api-key")
	}
	if s.Key != "" && key != s.Key {
		fail = &Failure{Status: http.StatusUnauthorized}
	}
	if fail != nil && (fail.Status != 0 || fail.Malformed) {
		s.fail(w, *fail, anthropic)
		return
	}
	switch r.URL.Path {
	case "/v1/organization/costs":
		s.openAICosts(w, r)
	case "/v1/organization/usage/completions":
		s.openAIUsage(w, r)
	case "/v1/organizations/cost_report":
		s.anthropicCosts(w, r)
	case "/v1/organizations/usage_report/messages":
		s.anthropicUsage(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) fail(w http.ResponseWriter, f Failure, anthropic bool) {
	if f.Malformed {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object": "page", "data": [{"start_time": `))
		return
	}
	if f.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	msg := f.Body
	if msg == "" {
		msg = http.StatusText(f.Status)
	}
	if anthropic {
		writeJSON(w, f.Status, map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
		return
	}
	writeJSON(w, f.Status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

// days are the UTC days in [start, end).
func days(start, end time.Time) []string {
	var out []string
	for d := start.UTC().Truncate(24 * time.Hour); d.Before(end); d = d.AddDate(0, 0, 1) {
		out = append(out, d.Format(time.DateOnly))
	}
	return out
}

// bucket is one day's results.
type bucket struct {
	day     string
	results []any
}

// paginate cuts buckets into pages: `limit` buckets a page (default 7), or
// with PageSize at most that many results a page (a day then spans pages).
// The cursor is "page_" + base64 of the page index.
func (s *Server) paginate(w http.ResponseWriter, r *http.Request, all []bucket) ([]bucket, string, bool) {
	q := r.URL.Query()
	var pages [][]bucket
	if s.PageSize > 0 {
		var cur []bucket
		n := 0
		for _, b := range all {
			rest := b.results
			for {
				take := min(len(rest), s.PageSize-n)
				cur = append(cur, bucket{day: b.day, results: rest[:take]})
				n += take
				rest = rest[take:]
				if n == s.PageSize {
					pages, cur, n = append(pages, cur), nil, 0
				}
				if len(rest) == 0 {
					break
				}
			}
		}
		if len(cur) > 0 || len(pages) == 0 {
			pages = append(pages, cur)
		}
	} else {
		limit, _ := strconv.Atoi(q.Get("limit"))
		if limit <= 0 {
			limit = 7
		}
		for i := 0; i < len(all); i += limit {
			pages = append(pages, all[i:min(i+limit, len(all))])
		}
		if len(pages) == 0 {
			pages = [][]bucket{nil}
		}
	}
	idx := 0
	if c := q.Get("page"); c != "" {
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(c, "page_"))
		if err == nil {
			idx, err = strconv.Atoi(string(b))
		}
		if err != nil || idx < 0 || idx >= len(pages) {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "invalid page"}})
			return nil, "", false
		}
	}
	next := ""
	if idx+1 < len(pages) {
		next = "page_" + base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(idx+1)))
	}
	return pages[idx], next, true
}

// window reads the time range of a request: its days.
func window(w http.ResponseWriter, r *http.Request, startKey, endKey string, unix bool) ([]string, bool) {
	q := r.URL.Query()
	parse := func(v string) (time.Time, error) {
		if unix {
			n, err := strconv.ParseInt(v, 10, 64)
			return time.Unix(n, 0).UTC(), err
		}
		return time.Parse(time.RFC3339, v)
	}
	start, err := parse(q.Get(startKey))
	if err != nil {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"message": startKey + " is required"}})
		return nil, false
	}
	end := start.AddDate(0, 0, 7)
	if v := q.Get(endKey); v != "" {
		if end, err = parse(v); err != nil {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "invalid " + endKey}})
			return nil, false
		}
	}
	return days(start, end), true
}

func nullable(next string) any {
	if next == "" {
		return nil
	}
	return next
}

// serve answers one export request: the buckets of the requested days
// built by results, paginated, in the provider's envelope.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, anthropic bool, results func(day string) []any) {
	startKey, endKey := "start_time", "end_time"
	if anthropic {
		startKey, endKey = "starting_at", "ending_at"
	}
	ds, ok := window(w, r, startKey, endKey, !anthropic)
	if !ok {
		return
	}
	s.mu.Lock()
	all := make([]bucket, 0, len(ds))
	for _, d := range ds {
		all = append(all, bucket{day: d, results: results(d)})
	}
	s.mu.Unlock()
	pg, next, ok := s.paginate(w, r, all)
	if !ok {
		return
	}
	data := []any{}
	for _, b := range pg {
		t, _ := time.Parse(time.DateOnly, b.day)
		rs := b.results
		if rs == nil {
			rs = []any{}
		}
		if anthropic {
			data = append(data, map[string]any{"starting_at": t.Format(time.RFC3339), "ending_at": t.AddDate(0, 0, 1).Format(time.RFC3339), "results": rs})
		} else {
			data = append(data, map[string]any{"object": "bucket", "start_time": t.Unix(), "end_time": t.AddDate(0, 0, 1).Unix(), "results": rs})
		}
	}
	if anthropic {
		writeJSON(w, 200, map[string]any{"data": data, "has_more": next != "", "next_page": nullable(next)})
		return
	}
	writeJSON(w, 200, map[string]any{"object": "page", "data": data, "has_more": next != "", "next_page": nullable(next)})
}

func (s *Server) openAICosts(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, false, func(d string) []any {
		var out []any
		for _, l := range s.costs[d] {
			if l.Provider == "anthropic" {
				continue
			}
			out = append(out, map[string]any{"object": "organization.costs.result",
				"amount": map[string]any{"value": l.USD, "currency": "usd"}, "line_item": l.LineItem, "project_id": nil})
		}
		return out
	})
}

func (s *Server) openAIUsage(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, false, func(d string) []any {
		var out []any
		for _, u := range s.usage[d] {
			if u.Provider == "anthropic" {
				continue
			}
			out = append(out, map[string]any{"object": "organization.usage.completions.result",
				"input_tokens": u.InputTokens + u.CachedInputTokens, "input_cached_tokens": u.CachedInputTokens,
				"output_tokens": u.OutputTokens, "input_audio_tokens": 0, "output_audio_tokens": 0,
				"num_model_requests": u.Requests, "model": u.Model, "project_id": nil, "user_id": nil, "api_key_id": nil, "batch": nil})
		}
		return out
	})
}

func (s *Server) anthropicCosts(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, true, func(d string) []any {
		var out []any
		for _, l := range s.costs[d] {
			if l.Provider == "openai" {
				continue
			}
			// Amounts are decimal strings in cents.
			out = append(out, map[string]any{"currency": "USD", "amount": strconv.FormatFloat(l.USD*100, 'f', -1, 64),
				"workspace_id": nil, "description": l.LineItem, "cost_type": "tokens", "context_window": "0-200k",
				"model": l.Model, "service_tier": "standard", "token_type": nil})
		}
		return out
	})
}

func (s *Server) anthropicUsage(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, true, func(d string) []any {
		var out []any
		for _, u := range s.usage[d] {
			if u.Provider == "openai" {
				continue
			}
			out = append(out, map[string]any{"uncached_input_tokens": u.InputTokens,
				"cache_creation":          map[string]any{"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": u.CacheCreationInputToken},
				"cache_read_input_tokens": u.CachedInputTokens, "output_tokens": u.OutputTokens,
				"server_tool_use": map[string]any{"web_search_requests": 0}, "api_key_id": nil, "workspace_id": nil,
				"model": u.Model, "service_tier": "standard", "context_window": "0-200k"})
		}
		return out
	})
}
