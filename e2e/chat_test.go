package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

const chatAgents = `
id: helper
description: Ollama helper
system_prompt: You help.
builtins: [write_file, read_file]
`

func agentsFor() map[string]string {
	return map[string]string{
		"helper.yaml": chatAgents,
		"gpt.yaml":    "id: gpt\ndescription: OpenAI agent\nllm: {provider: openai, model: gpt-4o-mini, max_tokens: 300}\nsystem_prompt: Be brief.\n",
		"claude.yaml": "id: claude\ndescription: Anthropic agent\nllm: {provider: anthropic, model: claude-3-5-haiku}\nchannels: [webhook]\n",
		"locked.yaml": "id: locked\nllm: {provider: openai, model: gpt-4o-mini, allowed_models: [gpt-4o-mini]}\n",
		"off.yaml":    "id: off\nenabled: false\n",
	}
}

const viewerKey = "viewer-key-0123456789"

func startChatGateway(t *testing.T, extra string) *gatewaytest.Gateway {
	return gatewaytest.Start(t, gatewaytest.Options{Agents: agentsFor(), Config: `
auth:
  keys:
    - {subject: vera, key: ` + viewerKey + `, role: viewer}
` + extra})
}

func TestChatEachWireFormat(t *testing.T) {
	g := startChatGateway(t, "")
	for _, tc := range []struct{ agent, format string }{{"helper", "ollama"}, {"gpt", "openai"}, {"claude", "anthropic"}} {
		r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": tc.agent, "text": "hello " + tc.format})
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", tc.agent, r.Status, r.Raw)
		}
		if r.JSON["reply"] != "echo: hello "+tc.format {
			t.Errorf("%s: reply %v", tc.agent, r.JSON["reply"])
		}
		sid, _ := r.JSON["session_id"].(string)
		if !strings.HasPrefix(sid, "http-") || r.JSON["run_id"] == "" || r.JSON["response_id"] == "" {
			t.Errorf("%s: ids %v", tc.agent, r.JSON)
		}
		calls := g.Fake.Calls()
		last := calls[len(calls)-1]
		if last.Format != tc.format {
			t.Errorf("%s: provider saw format %s", tc.agent, last.Format)
		}
	}
	// gpt's max_tokens (300) reached the provider.
	calls := g.Fake.Calls()
	for _, c := range calls {
		if c.Format == "openai" && c.MaxTokens != 300 {
			t.Errorf("openai max_tokens %d", c.MaxTokens)
		}
	}
}

func TestChatStream(t *testing.T) {
	g := startChatGateway(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "story", Reply: "once upon\na time", Chunks: 3})
	for _, tc := range []struct{ agent, format string }{{"helper", "ollama"}, {"gpt", "openai"}, {"claude", "anthropic"}} {
		n := g.Fake.CallCount()
		resp := postStream(t, g, map[string]any{"agent_id": tc.agent, "text": "tell a story"})
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: %d %s", tc.agent, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text, events, done := readSSE(t, strings.NewReader(string(raw)))
		if text != "once upon\na time" {
			t.Fatalf("%s: streamed text %q", tc.agent, text)
		}
		// Every data line is reply text (issue 18 item 11): the ids are in
		// headers, and no named frame is sent unless asked for.
		if !done || len(events) != 0 || strings.Contains(string(raw), "{") {
			t.Fatalf("%s: done=%v events=%v raw=%q", tc.agent, done, events, raw)
		}
		if !strings.HasPrefix(resp.Header.Get("X-Agentry-Session-Id"), "http-") || !strings.HasPrefix(resp.Header.Get("X-Agentry-Run-Id"), "run_") ||
			!strings.HasPrefix(resp.Header.Get("X-Agentry-Response-Id"), "resp_") {
			t.Fatalf("%s: id headers %v", tc.agent, resp.Header)
		}
		calls := g.Fake.Calls()
		if len(calls) != n+1 || !calls[n].Stream || calls[n].Format != tc.format {
			t.Fatalf("%s: provider call %+v", tc.agent, calls[len(calls)-1])
		}
	}
	// ?meta=true adds the named done frame with the same ids.
	resp := postStreamPath(t, g, "/api/v1/chat/stream?meta=true", map[string]any{"agent_id": "gpt", "text": "tell a story"})
	text, events, done := readSSE(t, resp.Body)
	resp.Body.Close()
	var ids map[string]string
	if !done || text != "once upon\na time" || len(events["done"]) != 1 || json.Unmarshal([]byte(events["done"][0]), &ids) != nil {
		t.Fatalf("meta: done=%v text=%q events=%v", done, text, events)
	}
	if ids["response_id"] != resp.Header.Get("X-Agentry-Response-Id") || ids["session_id"] != resp.Header.Get("X-Agentry-Session-Id") ||
		ids["run_id"] != resp.Header.Get("X-Agentry-Run-Id") {
		t.Fatalf("meta frame %v, headers %v", ids, resp.Header)
	}
	// The ids name the run that was recorded.
	var runs int64
	g.Store.DB.Table("agent_runs").Where("run_id = ? AND response_id = ? AND session_id = ?", ids["run_id"], ids["response_id"], ids["session_id"]).Count(&runs)
	if runs != 1 {
		t.Fatalf("no action-log row for %v", ids)
	}
}

func TestChatStreamFailureEndsWithErrorFrame(t *testing.T) {
	g := startChatGateway(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "cut", Reply: "partial answer that never ends", CutAfterChunks: 1})
	resp := postStream(t, g, map[string]any{"agent_id": "gpt", "text": "cut please"})
	_, events, done := readSSE(t, resp.Body)
	resp.Body.Close()
	if !done || len(events["error"]) != 1 || strings.HasPrefix(events["error"][0], "{") || events["error"][0] == "" {
		t.Fatalf("want a text error frame then [DONE]; done=%v events=%v", done, events)
	}
	resp = postStreamPath(t, g, "/api/v1/chat/stream?meta=true", map[string]any{"agent_id": "gpt", "text": "cut please"})
	_, events, done = readSSE(t, resp.Body)
	resp.Body.Close()
	if !done || len(events["error"]) != 1 || !strings.Contains(events["error"][0], `"error"`) {
		t.Fatalf("meta: want a JSON error frame then [DONE]; done=%v events=%v", done, events)
	}
}

func TestChatStreamClientDisconnectCancelsUpstream(t *testing.T) {
	g := startChatGateway(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "long", Reply: strings.Repeat("word ", 40), Chunks: 40, ChunkDelay: fakellm.Duration(100 * time.Millisecond)})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL()+"/api/v1/chat/stream", strings.NewReader(`{"agent_id":"gpt","text":"a long one"}`))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	started := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	expectCancelledRun(t, g, "gpt", resp.Header.Get("X-Agentry-Session-Id"), started, 4*time.Second)
}

// TestChatClientDisconnectCancelsUpstream: a POST /chat caller that hangs
// up before the answer cancels the provider call; the run and its ledger
// row are recorded cancelled and nothing is added to the conversation
// (issue 18 item 4).
func TestChatClientDisconnectCancelsUpstream(t *testing.T) {
	g := startChatGateway(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "slow", Reply: "too late", Delay: fakellm.Duration(5 * time.Second)})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL()+"/api/v1/chat", strings.NewReader(`{"agent_id":"gpt","text":"slow please","user_id":"leaver"}`))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	req.Header.Set("Content-Type", "application/json")
	started := time.Now()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the request answered %d before the provider did", resp.StatusCode)
	}
	expectCancelledRun(t, g, "gpt", "", started, 5*time.Second)
}

// expectCancelledRun waits for the agent's run to be recorded cancelled
// before the provider's answer would have ended (upstream), and checks
// its ledger row and that the session (sessionID when known) holds no
// message.
func expectCancelledRun(t *testing.T, g *gatewaytest.Gateway, agentID, sessionID string, started time.Time, upstream time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int64
		g.Store.DB.Table("agent_runs").Where("agent_id = ? AND status = ?", agentID, "cancelled").Count(&n)
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			var st []string
			g.Store.DB.Table("agent_runs").Where("agent_id = ?", agentID).Pluck("status", &st)
			t.Fatalf("the run was not recorded cancelled after the client disconnected: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(started); took >= upstream {
		t.Fatalf("the run ended after %s: the provider call was not cancelled", took)
	}
	var run struct{ SessionID string }
	g.Store.DB.Table("agent_runs").Where("agent_id = ? AND status = ?", agentID, "cancelled").Select("session_id").Scan(&run)
	if sessionID != "" && run.SessionID != sessionID {
		t.Fatalf("cancelled run in session %q, headers said %q", run.SessionID, sessionID)
	}
	sessionID = run.SessionID
	rows := ledger(t, g, "agent_id="+agentID)
	if len(rows) != 1 || rows[0].Outcome != "cancelled" || rows[0].InputTokens <= 0 || rows[0].CostMicros < 0 {
		t.Fatalf("ledger rows %+v", rows)
	}
	var msgs int64
	g.Store.DB.Table("chat_messages").Where("session_id = ?", sessionID).Count(&msgs)
	if sessionID == "" || msgs != 0 {
		t.Fatalf("session %q holds %d messages of an exchange nobody saw", sessionID, msgs)
	}
}

func TestToolCallProducesFileAndSessionContinues(t *testing.T) {
	g := startChatGateway(t, "")
	g.Fake.Script(
		fakellm.Rule{Contains: "write the report", Times: 1, ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("write_file", map[string]string{"path": "report.md", "content": "# Report"})}},
		fakellm.Rule{Contains: "wrote", Times: 1, Reply: "The report is written."},
	)
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "helper", "text": "write the report", "user_id": "u1"})
	if r.Status != 200 || r.JSON["reply"] != "The report is written." {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	sid := r.JSON["session_id"].(string)
	data, err := os.ReadFile(filepath.Join(g.Workspace, "sessions", sid, "report.md"))
	if err != nil || string(data) != "# Report" {
		t.Fatalf("file: %q %v", data, err)
	}
	before := g.Fake.CallCount()
	r2 := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "helper", "text": "and now?", "user_id": "u1"})
	if r2.JSON["session_id"] != sid {
		t.Fatalf("same user key must continue the session: %v vs %s", r2.JSON["session_id"], sid)
	}
	calls := g.Fake.Calls()
	if len(calls) != before+1 {
		t.Fatalf("calls %d -> %d", before, len(calls))
	}
	// system + (user, assistant tool call, tool, assistant) + new user
	if calls[len(calls)-1].MessageCount != 6 {
		t.Fatalf("follow-up sent %d messages", calls[len(calls)-1].MessageCount)
	}
	other := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "helper", "text": "hi", "user_id": "u2"})
	if other.JSON["session_id"] == sid {
		t.Fatal("another user key must get another session")
	}
	// Explicit session_id continues it too; a foreign one is 404.
	r3 := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "helper", "text": "again", "session_id": sid})
	if r3.Status != 200 || r3.JSON["session_id"] != sid {
		t.Fatalf("explicit session: %d %s", r3.Status, r3.Raw)
	}
	if r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "x", "session_id": sid}); r.Status != 404 {
		t.Fatalf("session of another agent: %d", r.Status)
	}
}

func TestOverrides(t *testing.T) {
	g := startChatGateway(t, "")
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "helper", "text": "hi",
		"overrides": map[string]any{"provider": "openai", "model": "gpt-4o", "max_tokens": 999999, "temperature": 0.5}})
	if r.Status != 200 {
		t.Fatalf("admin override: %d %s", r.Status, r.Raw)
	}
	last := g.Fake.Calls()[g.Fake.CallCount()-1]
	if last.Format != "openai" || last.Model != "gpt-4o" || last.MaxTokens != 32768 {
		t.Fatalf("override not applied or not clamped to the ceiling: %+v", last)
	}
	// The stored agent is unchanged.
	a := g.Do("GET", "/api/v1/agents/helper", nil)
	if llm := a.JSON["llm"].(map[string]any); llm["provider"] != "" && llm["provider"] != nil {
		t.Fatalf("agent changed: %v", llm)
	}
	cases := []struct {
		key    string
		ov     map[string]any
		agent  string
		status int
		code   string
	}{
		{viewerKey, map[string]any{"model": "gpt-4o"}, "gpt", 403, "forbidden"},
		{gatewaytest.TestAPIKey, map[string]any{"provider": "nope"}, "helper", 400, "invalid"},
		{gatewaytest.TestAPIKey, map[string]any{"provider": "openai", "model": "gpt-9"}, "helper", 400, "invalid"},
		{gatewaytest.TestAPIKey, map[string]any{"model": "gpt-4o"}, "locked", 403, "not_allowed"},
		{gatewaytest.TestAPIKey, map[string]any{"temperature": 7}, "gpt", 400, "invalid"},
		{gatewaytest.TestAPIKey, map[string]any{"tool_choice": "rm_rf"}, "helper", 400, "invalid"},
		{gatewaytest.TestAPIKey, map[string]any{"max_turns": 0}, "helper", 400, "invalid"},
	}
	for _, c := range cases {
		n := g.Fake.CallCount()
		r := g.DoAs(c.key, "POST", "/api/v1/chat", map[string]any{"agent_id": c.agent, "text": "hi", "overrides": c.ov})
		if r.Status != c.status || r.JSON["code"] != c.code {
			t.Errorf("%v: %d %s", c.ov, r.Status, r.Raw)
		}
		if g.Fake.CallCount() != n {
			t.Errorf("%v: the provider was called for a refused request", c.ov)
		}
	}
	// A viewer may chat without overrides.
	if r := g.DoAs(viewerKey, "POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "hi"}); r.Status != 200 {
		t.Fatalf("viewer chat: %d %s", r.Status, r.Raw)
	}
}

func TestFeedbackAndLearning(t *testing.T) {
	g := startChatGateway(t, "")
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "hi"})
	fb := map[string]any{"agent_id": "gpt", "session_id": r.JSON["session_id"], "run_id": r.JSON["run_id"], "response_id": r.JSON["response_id"], "rating": 1}
	f1 := g.Do("POST", "/api/v1/chat/feedback", fb)
	if f1.Status != 200 || f1.JSON["rating"] != float64(1) {
		t.Fatalf("%d %s", f1.Status, f1.Raw)
	}
	fb["rating"], fb["comment"] = -1, "Too terse; explain the steps."
	f2 := g.Do("POST", "/api/v1/chat/feedback", fb)
	if f2.Status != 200 || f2.JSON["id"] != f1.JSON["id"] || f2.JSON["rating"] != float64(-1) || f2.JSON["proposal_id"] == nil {
		t.Fatalf("upsert: %d %s", f2.Status, f2.Raw)
	}
	var n int64
	g.Store.DB.Table("feedbacks").Count(&n)
	if n != 1 {
		t.Fatalf("feedback rows %d, want 1 (upsert)", n)
	}
	bad := map[string]any{"agent_id": "gpt", "session_id": r.JSON["session_id"], "run_id": "run_nope", "response_id": r.JSON["response_id"], "rating": 1}
	if r := g.Do("POST", "/api/v1/chat/feedback", bad); r.Status != 404 {
		t.Fatalf("unknown tuple: %d %s", r.Status, r.Raw)
	}
	fb["rating"] = 5
	if r := g.Do("POST", "/api/v1/chat/feedback", fb); r.Status != 400 {
		t.Fatalf("rating 5: %d", r.Status)
	}
	if r := g.DoAs(viewerKey, "GET", "/api/v1/learning/feedback?agent_id=gpt", nil); r.Status != 403 {
		t.Fatalf("viewer learning: %d", r.Status)
	}
	l := g.Do("GET", "/api/v1/learning/feedback?agent_id=gpt&limit=10", nil)
	if l.Status != 200 || l.JSON["count"] != float64(1) {
		t.Fatalf("learning: %d %s", l.Status, l.Raw)
	}
	entry := l.JSON["feedback"].([]any)[0].(map[string]any)
	if entry["proposal_status"] != "pending" || entry["comment"] != "Too terse; explain the steps." {
		t.Fatalf("entry %v", entry)
	}
	if r := g.Do("GET", "/api/v1/learning/feedback?limit=abc", nil); r.Status != 400 {
		t.Fatalf("bad limit: %d", r.Status)
	}
}

func TestAgentsEndpoints(t *testing.T) {
	g := startChatGateway(t, "")
	r := g.Do("GET", "/api/v1/agents", nil)
	agents := r.JSON["agents"].([]any)
	if r.Status != 200 || len(agents) != 5 {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	for _, a := range agents {
		m := a.(map[string]any)
		if _, ok := m["system_prompt"]; ok {
			t.Fatal("list form must not carry system_prompt")
		}
		for _, k := range []string{"id", "description", "llm", "channels", "builtins"} {
			if _, ok := m[k]; !ok {
				t.Errorf("list form lacks %s", k)
			}
		}
	}
	one := g.Do("GET", "/api/v1/agents/gpt", nil)
	if one.JSON["system_prompt"] != "Be brief." || one.JSON["llm"].(map[string]any)["max_tokens"] != float64(300) {
		t.Fatalf("single form %s", one.Raw)
	}
	if r := g.Do("GET", "/api/v1/agents/ghost", nil); r.Status != 404 || r.JSON["error"] == nil {
		t.Fatalf("unknown agent %d", r.Status)
	}
	// A new file is picked up without a restart.
	os.WriteFile(filepath.Join(g.Workspace, "agents", "new.yaml"), []byte("id: newbie\n"), 0o644)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if g.Do("GET", "/api/v1/agents/newbie", nil).Status == 200 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("new agent file not loaded")
}

func TestChatBadInput(t *testing.T) {
	g := startChatGateway(t, "")
	countRows := func() (n int64) {
		g.Store.DB.Table("chat_sessions").Count(&n)
		return
	}
	cases := []struct {
		body   any
		status int
		want   string
	}{
		{map[string]any{"text": "hi"}, 400, "agent_id"},
		{map[string]any{"agent_id": "gpt"}, 400, "text"},
		{map[string]any{"agent_id": "gpt", "text": "   "}, 400, "text"},
		{map[string]any{"agent_id": "ghost", "text": "hi"}, 404, "ghost"},
		{map[string]any{"agent_id": "off", "text": "hi"}, 409, "disabled"},
		{"{not json", 400, "JSON"},
		{`["a"]`, 400, ""},
		{map[string]any{"agent_id": 5, "text": "hi"}, 400, "agent_id"},
		{`{"agent_id":"gpt","text":"` + strings.Repeat("a", 10<<20) + `"}`, 413, "too large"},
	}
	for _, c := range cases {
		n := g.Fake.CallCount()
		r := g.Do("POST", "/api/v1/chat", c.body)
		if r.Status != c.status || !strings.Contains(r.JSON["error"].(string), c.want) {
			t.Errorf("%.60v: %d %s", c.body, r.Status, r.Raw[:min(len(r.Raw), 200)])
		}
		if g.Fake.CallCount() != n {
			t.Errorf("%.60v: provider called", c.body)
		}
	}
	if n := countRows(); n != 0 {
		t.Fatalf("refused requests stored %d sessions", n)
	}
	// The stream endpoint refuses the same way, as JSON, before streaming.
	resp := postStream(t, g, map[string]any{"agent_id": "ghost", "text": "hi"})
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("stream refusal %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestProviderUnreachable(t *testing.T) {
	g := startChatGateway(t, `
llm:
  providers:
    ollama: {type: ollama, base_url: "http://127.0.0.1:1", default_model: llama3.2, max_retries: -1}
`)
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "helper", "text": "hi"})
	if r.Status != 502 || !strings.Contains(r.JSON["error"].(string), "is Ollama running at http://127.0.0.1:1") {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
}

// TestEveryRouteNeedsAuth walks every /api/v1 route of a gateway with all
// features mounted and proves 401 without or with a wrong key.
func TestEveryRouteNeedsAuth(t *testing.T) {
	g := startChatGateway(t, "")
	seen := 0
	for _, rt := range g.API().App().GetRoutes(true) {
		if !strings.HasPrefix(rt.Path, "/api/v1/") || rt.Method == "HEAD" || rt.Method == "OPTIONS" || rt.Method == "USE" || rt.Method == "CONNECT" || rt.Method == "TRACE" {
			continue
		}
		seen++
		path := rt.Path
		for _, p := range rt.Params {
			path = strings.Replace(path, ":"+p, "1", 1)
		}
		path = strings.ReplaceAll(path, "*", "x")
		for _, key := range []string{"", "wrong-key"} {
			r := g.DoAs(key, rt.Method, path, "{}")
			if r.Status != 401 || r.JSON["error"] == nil {
				t.Errorf("%s %s key=%q: %d %s", rt.Method, rt.Path, key, r.Status, r.Raw)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("only %d routes", seen)
	}
	t.Logf("%d routes checked", seen)
}

func postStream(t *testing.T, g *gatewaytest.Gateway, body any) *http.Response {
	t.Helper()
	return postStreamPath(t, g, "/api/v1/chat/stream", body)
}

func postStreamPath(t *testing.T, g *gatewaytest.Gateway, path string, body any) *http.Response {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", g.URL()+path, strings.NewReader(string(data)))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readSSE collects the default events' data (joined with "\n" per event,
// events concatenated) and named events until [DONE].
func readSSE(t *testing.T, r io.Reader) (text string, named map[string][]string, done bool) {
	t.Helper()
	named = map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var event string
	var data []string
	var b strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case line == "":
			joined := strings.Join(data, "\n")
			if event == "" && joined == "[DONE]" {
				return b.String(), named, true
			}
			if event == "" {
				b.WriteString(joined)
			} else {
				named[event] = append(named[event], joined)
			}
			event, data = "", nil
		}
	}
	return b.String(), named, false
}

// TestChatStreamRejectionIsAnHTTPStatus: a cost rejection happens before
// any text, so the stream answers with the status and the JSON envelope
// instead of a 200 with an error frame.
func TestChatStreamRejectionIsAnHTTPStatus(t *testing.T) {
	g := startChatGateway(t, "costs: {unknown_pricing: block}\n")
	resp := postStream(t, g, map[string]any{"agent_id": "gpt", "text": "hi"})
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 403 || body["code"] != "unknown_pricing" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%d %s %v", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if g.Fake.CallCount() != 0 {
		t.Fatal("the provider was called")
	}
}
