package probe

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// route is one request shape the generator bends. {id} is a numeric id,
// {name} a string id; Body is a plausible body (nil: the route takes
// none). OnlyBadIDs marks routes that change state when their id is
// valid (DELETE, disable): they are only sent bad ids.
type route struct {
	Family     string
	Method     string
	Path       string
	Body       map[string]any
	OnlyBadIDs bool
	// Query is a query parameter the route reads (bent by "bad query").
	Query string
	// Names, when set, are the only names sent in {name} (a route where
	// any valid name creates something).
	Names []string
}

// canaryTitle is the title of the tasks made before the bad input; they
// must be there, unchanged, afterwards (task 1 is what `DELETE
// /workboard/tasks/+1` deleted before issue 18 item 8).
func canaryTitle(i int) string { return fmt.Sprintf("canary %d", i) }

// routes covers every /api/v1 route family and the inbound webhook.
func routes() []route {
	wb := "/api/v1/workboard"
	return []route{
		{Family: "workboard", Method: "GET", Path: wb + "/tasks/{id}"},
		{Family: "workboard", Method: "PATCH", Path: wb + "/tasks/{id}", Body: map[string]any{"title": canaryTitle(1)}},
		{Family: "workboard", Method: "DELETE", Path: wb + "/tasks/{id}", OnlyBadIDs: true},
		{Family: "workboard", Method: "GET", Path: wb + "/tasks", Query: "limit"},
		{Family: "workboard", Method: "POST", Path: wb + "/tasks", Body: map[string]any{"title": "generated", "agent_id": "probe", "description": "d", "priority": 1}},
		{Family: "workboard", Method: "POST", Path: wb + "/tasks/{id}/run", OnlyBadIDs: true},
		{Family: "workboard", Method: "GET", Path: wb + "/tasks/{id}/runs/{id}"},
		{Family: "workboard", Method: "POST", Path: wb + "/tasks/{id}/runs/{id}/cancel", OnlyBadIDs: true},
		{Family: "workboard", Method: "POST", Path: wb + "/tasks/{id}/comments", Body: map[string]any{"body": "comment"}, OnlyBadIDs: true},
		{Family: "workboard", Method: "DELETE", Path: wb + "/comments/{id}", OnlyBadIDs: true},
		{Family: "workboard", Method: "GET", Path: wb + "/artifacts/{id}/download"},
		{Family: "approvals", Method: "GET", Path: "/api/v1/approvals/{id}"},
		{Family: "approvals", Method: "POST", Path: "/api/v1/approvals/{id}", Body: map[string]any{"decision": "approve", "comment": "c"}, OnlyBadIDs: true},
		{Family: "agents", Method: "GET", Path: "/api/v1/agents/{name}"},
		{Family: "agents", Method: "POST", Path: "/api/v1/agents/{name}/disable", OnlyBadIDs: true},
		{Family: "agents", Method: "DELETE", Path: "/api/v1/agents/{name}", OnlyBadIDs: true},
		{Family: "agents", Method: "POST", Path: "/api/v1/agents/{name}/trigger", Body: map[string]any{"text": "hello"}, OnlyBadIDs: true},
		{Family: "chat", Method: "POST", Path: "/api/v1/chat", Body: map[string]any{"agent_id": "probe", "text": "hello", "user_id": "u1", "session_id": "s1", "overrides": map[string]any{"model": modelPlain}}},
		{Family: "chat", Method: "POST", Path: "/api/v1/chat/feedback", Body: map[string]any{"response_id": "r1", "rating": 1}},
		{Family: "chat", Method: "GET", Path: "/api/v1/learning/feedback", Query: "limit"},
		{Family: "memory", Method: "GET", Path: "/api/v1/memory", Query: "user_id"},
		{Family: "channels", Method: "GET", Path: "/api/v1/channels/{name}"},
		{Family: "channels", Method: "PATCH", Path: "/api/v1/channels/{name}", Body: map[string]any{"settings": map[string]any{"url": "http://127.0.0.1:1/"}}, OnlyBadIDs: true},
		{Family: "channels", Method: "POST", Path: "/api/v1/channels/webhook/send", Body: map[string]any{"text": "probe", "to": "http://[::a9fe:a9fe]/"}},
		{Family: "channels", Method: "GET", Path: "/api/v1/deliveries/{name}"},
		{Family: "channels", Method: "GET", Path: "/api/v1/deliveries", Query: "limit"},
		{Family: "schedules", Method: "POST", Path: "/api/v1/schedules/{name}/trigger", OnlyBadIDs: true},
		{Family: "costs", Method: "POST", Path: "/api/v1/costs/estimate", Body: map[string]any{"agent_id": "probe", "text": "hello"}},
		{Family: "costs", Method: "GET", Path: "/api/v1/costs/calls", Query: "limit"},
		{Family: "costs", Method: "GET", Path: "/api/v1/costs/chargeback", Query: "from"},
		{Family: "costs", Method: "GET", Path: "/api/v1/costs/reconciliation/runs/{name}"},
		{Family: "config", Method: "PATCH", Path: "/api/v1/config", Body: map[string]any{"server": map[string]any{"port": "not a port"}}},
		{Family: "secrets", Method: "PUT", Path: "/api/v1/secrets/{name}", Body: map[string]any{"value": "v"}, OnlyBadIDs: true,
			Names: []string{"1abc", "-x", ".x", "a%20b", "a%2Fb", "%00", "%ff%fe", "%C3%A9t%C3%A9", strings.Repeat("s", 129)}},
		{Family: "secrets", Method: "DELETE", Path: "/api/v1/secrets/{name}", OnlyBadIDs: true},
		{Family: "mcp", Method: "PUT", Path: "/api/v1/mcp/own/{name}", Body: map[string]any{"url": "http://[::a9fe:a9fe]/mcp"}, OnlyBadIDs: true},
		{Family: "mcp", Method: "GET", Path: "/api/v1/mcp/own/{name}"},
		{Family: "skills", Method: "GET", Path: "/api/v1/skills/{name}"},
		{Family: "skills", Method: "POST", Path: "/api/v1/skills/install", Body: map[string]any{"source": "http://[::a9fe:a9fe]/skill.tar.gz"}},
		{Family: "packages", Method: "POST", Path: "/api/v1/agent-packages/inspect", Body: map[string]any{"package": "x"}},
		{Family: "packages", Method: "GET", Path: "/api/v1/package-installs/{name}"},
		{Family: "packages", Method: "GET", Path: "/api/v1/agents/{name}/package"},
		{Family: "webhooks", Method: "POST", Path: "/api/v1/webhooks/hook", Body: map[string]any{"text": "hello", "user": map[string]any{"id": "u1"}}},
		{Family: "webhooks", Method: "POST", Path: "/api/v1/webhooks/{name}", Body: map[string]any{"text": "hello"}, OnlyBadIDs: true},
		{Family: "webhooks", Method: "GET", Path: "/api/v1/webhooks/hook/runs/{name}"},
		{Family: "logs", Method: "GET", Path: "/api/v1/logs", Query: "lines"},
		{Family: "logs", Method: "GET", Path: "/api/v1/logs/audit", Query: "lines"},
		{Family: "events", Method: "GET", Path: "/api/v1/events", Query: "task_id"},
		{Family: "admin", Method: "GET", Path: "/api/v1/diagnostics"},
		{Family: "admin", Method: "GET", Path: "/api/v1/whoami"},
	}
}

// Bad ids: non-canonical spellings of 1 (they must not reach task 1),
// out-of-range numbers and junk.
var (
	nonCanonicalIDs = []string{"+1", "01", "001", "1.0", "1e0", "0x1", "%2B1", "%201", "1%20", "%EF%BC%91"}
	junkIDs         = []string{"-0", "-1", "0", "99999999999999999999", "9223372036854775808", "abc", "%00", "1%00", "%ff%fe",
		"..%2F..%2Fetc%2Fpasswd", strings.Repeat("9", 400), strings.Repeat("a", 5000), "%E2%80%AE1"}
)

// malformed are bodies that are not the JSON object a route expects.
var malformed = [][]byte{
	[]byte(`{`), []byte(`{"a":`), []byte(`[]`), []byte(`null`), []byte(`"text"`), []byte(`123`), []byte(`{} x`),
	[]byte(`{"text":"a"}{"text":"b"}`), []byte("\x00"), []byte("{\"text\":\"a\x00b\"}"), []byte("{\"text\":\"\xff\xfe\"}"),
	[]byte(`{"text":"\ud800"}`), []byte(strings.Repeat("[", 100000)), []byte(`{"text":1e999}`), []byte(`{'text':'a'}`),
	[]byte("\xef\xbb\xbf{}"), []byte(`{"text":"a","text":"b"}`), []byte(""),
}

// wrongTyped are values of the wrong type for any field of the templates
// (strings are replaced by these; numbers and objects by the strings).
var wrongTyped = []any{123, 1.5, -0.0, true, []any{}, map[string]any{}, json.RawMessage(`1e400`), json.RawMessage(`-0`),
	json.RawMessage(`99999999999999999999`)}
var wrongForNonStrings = []any{"x", "1", "", "1.5", "-0", json.RawMessage(`1.5`), json.RawMessage(`-0`), json.RawMessage(`70000`), true}

// ssrfForms are addresses that embed a loopback, link-local or private IPv4
// address (issue 18 item 7) or name one directly: all must be refused.
var ssrfForms = []string{
	"http://[::127.0.0.1]/", "http://[::a9fe:a9fe]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b:1::a9fe:a9fe]/",
	"http://[2002:a9fe:a9fe::]/", "http://[::ffff:169.254.169.254]/", "http://[::ffff:a9fe:a9fe]/",
	"http://[2001:0:4136:e378:8000:63bf:5601:5656]/", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/",
	"http://[::1]/", "http://[fe80::1]/", "http://0.0.0.0/", "http://[::]/",
}

// badAuth are Authorization headers that must not be accepted (key is the
// admin key, viewer a valid viewer key used on an admin-only route).
func badAuth(key string) []string {
	return []string{"", "Bearer", "Bearer ", "Bearer " + key + "x", "Bearer x" + key, "Bearer " + key[:len(key)-1],
		"Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+key)), "Bearer \u00a0" + key, "Bearer " + key + "\u00a0",
		"Token " + key, key, "Bearer a.b.c", "Bearer " + strings.Repeat("k", 8000)}
}

// goodAuth are spellings RFC 7235 allows (scheme case, optional
// whitespace around the header value): they must be accepted.
func goodAuth(key string) []string {
	return []string{"Bearer " + key, "bearer " + key, "BEARER " + key, "Bearer " + key + " ", " Bearer " + key, "Bearer " + key + "\t"}
}

// generate makes n requests from seed: the same seed gives the same list.
func generate(seed uint64, n int, key, viewerKey string) []request {
	rng := rand.New(rand.NewPCG(seed, 18))
	rs := routes()
	out := make([]request, 0, n)
	bearer := "Bearer " + key
	for len(out) < n {
		rt := rs[rng.IntN(len(rs))]
		r := request{Family: rt.Family, Method: rt.Method, Auth: bearer}
		path, kind := rt.Path, ""
		if rt.Names != nil {
			path = fillIDs(path, func() string { return rt.Names[rng.IntN(len(rt.Names))] })
		}
		switch k := rng.IntN(100); {
		case k < 22 && strings.Contains(path, "{"):
			kind = "bad id"
			r.NumericID = strings.Contains(path, "{id}")
			ids := junkIDs
			if rng.IntN(2) == 0 {
				ids = nonCanonicalIDs
			}
			path = fillIDs(path, func() string { return ids[rng.IntN(len(ids))] })
			r.Body = encode(rt.Body)
		case k < 34:
			kind = "malformed JSON"
			r.Body = malformed[rng.IntN(len(malformed))]
		case k < 46 && rt.Body != nil:
			kind = "wrong type"
			r.Body = encode(bend(rng, rt.Body, func(old any) any {
				if _, isString := old.(string); isString {
					return wrongTyped[rng.IntN(len(wrongTyped))]
				}
				return wrongForNonStrings[rng.IntN(len(wrongForNonStrings))]
			}))
		case k < 52 && rt.Body != nil:
			kind = "unknown field"
			b := clone(rt.Body)
			b["zz_unknown_field"] = 1
			r.Body = encode(b)
		case k < 58 && rt.Body != nil:
			kind = "huge string"
			r.Pad, r.PadWith = 300<<10, "é"
			if rng.IntN(10) == 0 {
				r.Pad = 3 << 20 // under the 4 MiB body limit
			}
			r.Body = encode(bend(rng, rt.Body, func(any) any { return padMark }))
		case k < 64 && rt.Body != nil:
			kind = "NUL byte"
			r.Body = encode(bend(rng, rt.Body, func(any) any { return "a\x00b" }))
		case k < 70 && rt.Body != nil:
			kind = "invalid UTF-8"
			b := encode(bend(rng, rt.Body, func(any) any { return "MARK" }))
			r.Body = []byte(strings.Replace(string(b), "MARK", "a\xff\xfeb", 1))
		case k < 76 && rt.Query != "":
			kind = "bad query"
			vals := append(append([]string{}, nonCanonicalIDs...), junkIDs...)
			vals = append(vals, "-1", "1.5", "1e9", "%zz")
			path += "?" + rt.Query + "=" + vals[rng.IntN(len(vals))]
		case k < 84:
			kind = "bad auth"
			forms := badAuth(key)
			r.Auth = forms[rng.IntN(len(forms))]
			if rng.IntN(4) == 0 {
				// A valid viewer key on an admin-only route.
				kind, r.Auth, r.Method, path = "viewer on admin route", "Bearer "+viewerKey, "GET", "/api/v1/logs"
			}
			path = fillIDs(path, func() string { return "1" })
			if rt.OnlyBadIDs {
				path = fillIDs(rt.Path, func() string { return "zz-missing" })
			}
			r.Body = encode(rt.Body)
		case k < 88:
			kind = "auth spelling"
			forms := goodAuth(key)
			r.Auth, r.Method, r.Family, path = forms[rng.IntN(len(forms))], "GET", "admin", "/api/v1/whoami"
		case k < 93:
			kind = "ssrf"
			to := ssrfForms[rng.IntN(len(ssrfForms))]
			switch rng.IntN(3) {
			case 0:
				r.Family, r.Method, path = "channels", "POST", "/api/v1/channels/webhook/send"
				r.Body = encode(map[string]any{"text": "probe", "to": to})
			case 1:
				r.Family, r.Method, path = "mcp", "PUT", "/api/v1/mcp/own/ssrf-probe"
				r.Body = encode(map[string]any{"url": to + "mcp"})
			default:
				r.Family, r.Method, path = "skills", "POST", "/api/v1/skills/install"
				r.Body = encode(map[string]any{"source": to + "skill.tar.gz"})
			}
		case k < 95:
			kind = "wrong content type"
			r.Body = encode(rt.Body)
			if r.Body == nil {
				r.Body = []byte(`{}`)
			}
			r.ContentType = []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/json; charset=latin1"}[rng.IntN(4)]
		case k < 96 && rt.Body != nil:
			kind = "oversized body"
			r.Pad, r.PadWith = 12<<20, "x"
			r.Body = encode(bend(rng, rt.Body, func(any) any { return padMark }))
		default:
			continue
		}
		if strings.Contains(path, "{") {
			// A mutation that kept the ids: a harmless valid one, or a bad
			// one on routes that must not be hit with valid ids.
			id := func() string { return "1" }
			if rt.OnlyBadIDs {
				id = func() string { return "zz-missing" }
			}
			if strings.Contains(path, "{name}") && !rt.OnlyBadIDs {
				id = func() string { return "probe" }
			}
			path = fillIDs(path, id)
		}
		r.Path, r.Kind = path, kind
		out = append(out, r)
	}
	return out
}

func fillIDs(path string, id func() string) string {
	for _, ph := range []string{"{id}", "{name}"} {
		for strings.Contains(path, ph) {
			path = strings.Replace(path, ph, id(), 1)
		}
	}
	return path
}

func encode(b map[string]any) []byte {
	if b == nil {
		return nil
	}
	raw, _ := json.Marshal(b)
	return raw
}

func clone(b map[string]any) map[string]any {
	raw, _ := json.Marshal(b)
	var out map[string]any
	json.Unmarshal(raw, &out)
	return out
}

// bend replaces one field (at any depth) of a copy of body by f(old).
func bend(rng *rand.Rand, body map[string]any, f func(old any) any) map[string]any {
	b := clone(body)
	m := b
	for {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		k := keys[rng.IntN(len(keys))]
		if inner, ok := m[k].(map[string]any); ok && len(inner) > 0 && rng.IntN(2) == 0 {
			m = inner
			continue
		}
		m[k] = f(m[k])
		return b
	}
}

// BadInput is the first part of the report.
type BadInput struct {
	Requests int            `json:"requests"`
	Classes  map[string]int `json:"classes"` // "2xx", "4xx", ...
	ByKind   map[string]int `json:"by_kind"`
	// Must be 0:
	ServerErrors   int `json:"server_errors"`
	NonEnvelope    int `json:"non_envelope"`
	Hangs          int `json:"hangs"`
	WrongAuthOK    int `json:"wrong_auth_accepted"`
	RightAuthNotOK int `json:"rfc_auth_refused"`
	SSRFAccepted   int `json:"ssrf_accepted"`
	NonCanonicalOK int `json:"non_canonical_ids_accepted"`
	StateChanged   int `json:"state_changed"`
	Unhealthy      int `json:"unhealthy_after"`
	// Not an error: the connection was closed (an oversized body refused
	// before it was read).
	ConnErrors int `json:"connection_errors"`
	// Accepted counts 2xx answers by kind (a generated request can be
	// valid: a string that fits, a body without the bent field).
	Accepted map[string]int `json:"accepted"`
	// HTTPGetSSRFAccepted counts SSRF forms the http_get tool fetched
	// instead of refusing (asked through a scripted tool call).
	HTTPGetSSRFAccepted int `json:"http_get_ssrf_accepted"`
	HTTPGetSSRFChecked  int `json:"http_get_ssrf_checked"`
	// Examples of each defect, a few per figure.
	Examples []string `json:"examples,omitempty"`
}

// runBadInput sends the requests with a few workers and counts.
func runBadInput(c *client, reqs []request, workers int) *BadInput {
	rep := &BadInput{Requests: len(reqs), Classes: map[string]int{}, ByKind: map[string]int{}, Accepted: map[string]int{}}
	var mu sync.Mutex
	example := func(format string, args ...any) {
		if len(rep.Examples) < 40 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	work := make(chan request)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				a := c.send(r)
				mu.Lock()
				count(rep, r, a, example)
				mu.Unlock()
			}
		}()
	}
	for _, r := range reqs {
		work <- r
	}
	close(work)
	wg.Wait()
	return rep
}

func count(rep *BadInput, r request, a answer, example func(string, ...any)) {
	rep.ByKind[r.Kind]++
	what := fmt.Sprintf("%s %s [%s]", r.Method, short(r.Path), r.Kind)
	switch {
	case a.Hung:
		rep.Hangs++
		example("hang: %s", what)
		return
	case a.Err != nil:
		rep.ConnErrors++
		if r.Kind != "oversized body" && r.Kind != "huge string" {
			example("connection error: %s: %s", what, short(a.Err.Error()))
		}
		return
	}
	rep.Classes[fmt.Sprintf("%dxx", a.Status/100)]++
	if a.Status >= 500 {
		rep.ServerErrors++
		example("%d: %s: %.200s", a.Status, what, a.Raw)
	}
	if a.Status >= 400 && !a.Stream {
		if _, ok := a.JSON["error"].(string); !ok {
			rep.NonEnvelope++
			example("not in the error envelope: %d %s: %.200s", a.Status, what, a.Raw)
		}
	}
	ok := a.Status < 300
	if ok {
		rep.Accepted[r.Kind]++
	}
	switch r.Kind {
	case "bad auth", "viewer on admin route":
		if ok {
			rep.WrongAuthOK++
			example("accepted %q: %s", short(r.Auth), what)
		}
	case "auth spelling":
		if !ok {
			rep.RightAuthNotOK++
			example("refused %q: %d", short(r.Auth), a.Status)
		}
	case "ssrf":
		if ok {
			rep.SSRFAccepted++
			example("SSRF form accepted: %s %.200s", what, r.Body)
		}
	case "bad id":
		if ok && r.NumericID && refersToOne(r.Path) {
			rep.NonCanonicalOK++
			example("non-canonical id accepted: %s -> %d", what, a.Status)
		}
	}
}

// refersToOne: the path holds a non-canonical spelling of 1.
func refersToOne(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		for _, id := range nonCanonicalIDs {
			if seg == id {
				return true
			}
		}
	}
	return false
}

// short makes s printable and short, for the examples.
func short(s string) string {
	s = strings.ToValidUTF8(strconv.Quote(s), "?")
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
