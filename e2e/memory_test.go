package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// Memory (issue 45): agents that opt in remember facts across sessions,
// scoped by agent, subject and end user.

const (
	memAliceKey = "mem-alice-key-0123456789"
	memBobKey   = "mem-bob-key-0123456789"
	memFact     = "ana's favourite colour is teal"
)

var memAgents = map[string]string{
	"mem.yaml": "id: mem\ntrigger: webhook\nmemory: true\nsystem_prompt: You help.\nmax_turns: 4\n" +
		"webhook: {text_path: text, user_id_path: user, thread_id_path: thread}\n",
	"other.yaml":  "id: other\nmemory: true\nsystem_prompt: You help too.\nmax_turns: 4\n",
	"plain.yaml":  "id: plain\nsystem_prompt: No memory.\n",
	"tasker.yaml": "id: tasker\nmemory: {files: false}\nsystem_prompt: You do tasks.\nmax_turns: 4\n",
}

func memGateway(t *testing.T, postgres bool) *gatewaytest.Gateway {
	t.Helper()
	return gatewaytest.Start(t, gatewaytest.Options{Agents: memAgents, Postgres: postgres, Config: `
memory: {hot_memory_chars: 200}
auth:
  keys:
    - {subject: alice, key: ` + memAliceKey + `, role: member}
    - {subject: bob, key: ` + memBobKey + `, role: member}
`})
}

// lastBody is the request body the fake provider received last.
func lastBody(t *testing.T, g *gatewaytest.Gateway) string {
	t.Helper()
	calls := g.Fake.Calls()
	if len(calls) == 0 {
		t.Fatal("the provider was not called")
	}
	return string(calls[len(calls)-1].Body)
}

func memChat(t *testing.T, g *gatewaytest.Gateway, key, agentID, user, text string) gatewaytest.Response {
	t.Helper()
	r := g.DoAs(key, "POST", "/api/v1/chat", map[string]any{"agent_id": agentID, "text": text, "user_id": user})
	if r.Status != 200 {
		t.Fatalf("chat %s/%s %q: %d %s", agentID, user, text, r.Status, r.Raw)
	}
	return r
}

func TestMemoryAcrossSessionsAndIsolation(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { testMemoryAcrossSessions(t, pg) })
	}
}

func testMemoryAcrossSessions(t *testing.T, postgres bool) {
	g := memGateway(t, postgres)
	g.Fake.Script(
		fakellm.Rule{Contains: "please remember", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_write", map[string]string{"text": memFact})}},
		fakellm.Rule{Contains: "remembered (memory", Reply: "Noted."},
		fakellm.Rule{Contains: "search please", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_search", map[string]string{"query": "which colour?"})}},
		fakellm.Rule{Contains: "[fact", Reply: "FOUND"},
		fakellm.Rule{Contains: "nothing remembered matches", Reply: "NONE"},
	)

	// Session 1: alice's user ana tells the agent something; the model
	// stores it with memory_write.
	r := memChat(t, g, memAliceKey, "mem", "ana", "please remember my colour")
	if r.JSON["reply"] != "Noted." {
		t.Fatalf("reply %s", r.Raw)
	}
	if calls := g.Fake.Calls(); !strings.Contains(strings.Join(calls[0].Tools, ","), "memory_write") {
		t.Fatalf("the memory agent was not offered memory_write: %v", calls[0].Tools)
	}

	// Session 2 (a webhook thread: a new session of the same subject and
	// user): the fact is pinned into the system prompt.
	wh := g.DoAs(memAliceKey, "POST", "/api/v1/webhooks/mem", `{"text":"hello again","user":"ana","thread":"t-2"}`)
	if wh.Status != 200 || wh.JSON["session_id"] == r.JSON["session_id"] {
		t.Fatalf("webhook: %d %s", wh.Status, wh.Raw)
	}
	body := lastBody(t, g)
	if !strings.Contains(body, "What you remember") || !strings.Contains(body, "- "+memFact) {
		t.Fatalf("the next session's prompt lacks the memory: %s", body)
	}
	if strings.Contains(body, "please remember") {
		t.Fatalf("the next session carried the first one's history: %s", body)
	}

	// Never in another user's, subject's or agent's prompt.
	for _, c := range []struct{ key, agent, user string }{
		{memAliceKey, "mem", "bea"},   // another end user of the same key
		{memBobKey, "mem", "ana"},     // another subject naming the same user id
		{memAliceKey, "other", "ana"}, // another agent
		{memAliceKey, "plain", "ana"}, // an agent without memory
	} {
		memChat(t, g, c.key, c.agent, c.user, "hello from "+c.user)
		if b := lastBody(t, g); strings.Contains(b, "teal") || strings.Contains(b, "What you remember") {
			t.Fatalf("%+v: another scope's memory reached the prompt: %s", c, b)
		}
	}

	// memory_search finds it for ana under alice only.
	if r := memChat(t, g, memAliceKey, "mem", "ana", "search please"); r.JSON["reply"] != "FOUND" {
		t.Fatalf("alice/ana search: %s", r.Raw)
	}
	for _, c := range []struct{ key, agent, user string }{{memAliceKey, "mem", "bea"}, {memBobKey, "mem", "ana"}, {memAliceKey, "other", "ana"}} {
		if r := memChat(t, g, c.key, c.agent, c.user, "search please"); r.JSON["reply"] != "NONE" {
			t.Fatalf("%+v search found another scope's memory: %s", c, r.Raw)
		}
	}

	// Routes: alice lists her own; bob sees none of hers and may not ask.
	list := g.DoAs(memAliceKey, "GET", "/api/v1/memory/entries?agent_id=mem&kind=fact", nil)
	if list.Status != 200 || list.JSON["count"] != float64(1) {
		t.Fatalf("alice's list: %d %s", list.Status, list.Raw)
	}
	entry := list.JSON["memories"].([]any)[0].(map[string]any)
	id := int64(entry["id"].(float64))
	if entry["text"] != memFact || entry["user_id"] != "ana" || entry["subject"] != "alice" {
		t.Fatalf("entry %v", entry)
	}
	if l := g.DoAs(memBobKey, "GET", "/api/v1/memory/entries?agent_id=mem", nil); l.Status != 200 || strings.Contains(string(l.Raw), "teal") {
		t.Fatalf("bob's list: %d %s", l.Status, l.Raw)
	}
	if l := g.DoAs(memBobKey, "GET", "/api/v1/memory/entries?agent_id=mem&subject=alice", nil); l.Status != 403 {
		t.Fatalf("bob asking for alice's: %d %s", l.Status, l.Raw)
	}
	path := fmt.Sprintf("/api/v1/memory/entries/%d", id)
	if r := g.DoAs(memBobKey, "GET", path, nil); r.Status != 404 {
		t.Fatalf("bob get: %d %s", r.Status, r.Raw)
	}
	if r := g.DoAs(memBobKey, "DELETE", path, nil); r.Status != 404 {
		t.Fatalf("bob delete: %d %s", r.Status, r.Raw)
	}
	// The admin key (memory:read) reads alice's.
	if r := g.Do("GET", "/api/v1/memory/entries?agent_id=mem&subject=alice&user_id=ana&kind=fact", nil); r.Status != 200 || r.JSON["count"] != float64(1) {
		t.Fatalf("admin list of alice's: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("GET", path, nil); r.Status != 200 || r.JSON["text"] != memFact {
		t.Fatalf("admin get: %d %s", r.Status, r.Raw)
	}
	// Finished exchanges are archived (memory.archive defaults to true).
	if r := g.DoAs(memAliceKey, "GET", "/api/v1/memory/entries?agent_id=mem&user_id=ana&kind=archive", nil); r.Status != 200 || r.JSON["count"].(float64) < 2 ||
		!strings.Contains(string(r.Raw), "please remember my colour") {
		t.Fatalf("archive: %d %s", r.Status, r.Raw)
	}

	// GET /learning/feedback needs memory:read, which a member lacks.
	if r := g.DoAs(memAliceKey, "GET", "/api/v1/learning/feedback?agent_id=mem", nil); r.Status != 403 {
		t.Fatalf("member learning feedback: %d %s", r.Status, r.Raw)
	}

	// Bad input: over the cap, empty, wrong kind.
	long := strings.Repeat("x", 201)
	if r := g.DoAs(memAliceKey, "POST", "/api/v1/memory/entries", map[string]any{"agent_id": "mem", "text": long}); r.Status != 400 || r.JSON["code"] != "memory_too_long" {
		t.Fatalf("over the cap: %d %s", r.Status, r.Raw)
	}
	if r := g.DoAs(memAliceKey, "POST", "/api/v1/memory/entries", map[string]any{"agent_id": "mem", "text": "  "}); r.Status != 400 {
		t.Fatalf("empty text: %d %s", r.Status, r.Raw)
	}
	if r := g.DoAs(memAliceKey, "GET", "/api/v1/memory/entries?agent_id=mem&kind=nope", nil); r.Status != 400 {
		t.Fatalf("bad kind: %d %s", r.Status, r.Raw)
	}
	if r := g.DoAs(memAliceKey, "GET", "/api/v1/memory/entries", nil); r.Status != 400 {
		t.Fatalf("no agent_id: %d %s", r.Status, r.Raw)
	}

	// Deleted: gone from the prompt.
	if r := g.DoAs(memAliceKey, "DELETE", path, nil); r.Status != 204 {
		t.Fatalf("alice delete: %d %s", r.Status, r.Raw)
	}
	g.DoAs(memAliceKey, "POST", "/api/v1/webhooks/mem", `{"text":"after delete","user":"ana","thread":"t-3"}`)
	if b := lastBody(t, g); strings.Contains(b, "- "+memFact) {
		t.Fatalf("a deleted memory is still pinned: %s", b)
	}
}

// The model's bad input to the memory tools is a tool error it sees, never
// a failed request: over the cap, an empty query, a 100 KB query.
func TestMemoryToolsBadInput(t *testing.T) {
	g := memGateway(t, false)
	huge := strings.Repeat("teal ", 20<<10) // 100 KB
	g.Fake.Script(
		fakellm.Rule{Contains: "too long", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_write", map[string]string{"text": strings.Repeat("y", 201)})}},
		fakellm.Rule{Contains: "empty query", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_search", map[string]string{"query": "  ?! "})}},
		fakellm.Rule{Contains: "huge query", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_search", map[string]string{"query": huge})}},
		fakellm.Rule{Contains: "escape", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_write_file", map[string]string{"path": "../../../../escape.md", "content": "x"})}},
		fakellm.Rule{Contains: "note it", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_write_file", map[string]string{"path": "prefs.md", "content": "# Prefs\nteal"})}},
		fakellm.Rule{Contains: "read it", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_read_file", map[string]string{"path": "prefs.md"})}},
		fakellm.Rule{Contains: "at most 200 fit", Reply: "CAP"},
		fakellm.Rule{Contains: "needs a query", Reply: "EMPTY"},
		fakellm.Rule{Contains: "nothing remembered matches", Reply: "SEARCHED"},
		fakellm.Rule{Contains: "leaves the notes folder", Reply: "CONFINED"},
		fakellm.Rule{Contains: "wrote 12 bytes to prefs.md", Reply: "WROTE"},
		fakellm.Rule{Contains: "# Prefs", Reply: "READ"},
	)
	for text, want := range map[string]string{"too long": "CAP", "empty query": "EMPTY", "huge query": "SEARCHED",
		"escape": "CONFINED", "note it": "WROTE"} {
		if r := memChat(t, g, memAliceKey, "other", "ana", text); r.JSON["reply"] != want {
			t.Fatalf("%s: %s", text, r.Raw)
		}
	}
	if r := memChat(t, g, memAliceKey, "other", "ana", "read it"); r.JSON["reply"] != "READ" {
		t.Fatalf("read it: %s", r.Raw)
	}
	if r := g.DoAs(memAliceKey, "GET", "/api/v1/memory/entries?agent_id=other&kind=fact", nil); r.JSON["count"] != float64(0) {
		t.Fatalf("a refused write was stored: %s", r.Raw)
	}
}

// A task run's memory_write is stored in the run's scope (the subject that
// started it) and pinned into that subject's next chat.
func TestMemoryTaskRunWrites(t *testing.T) {
	g := memGateway(t, false)
	g.Fake.Script(
		fakellm.Rule{Contains: "Remember the deadline", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("memory_write", map[string]string{"text": "the launch deadline is friday"})}},
		fakellm.Rule{Contains: "remembered (memory", Reply: "Saved it."},
	)
	task := g.DoAs(memAliceKey, "POST", "/api/v1/workboard/tasks", map[string]any{"title": "Remember the deadline", "agent_id": "tasker"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := g.DoAs(memAliceKey, "POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", taskID), nil)
	if run.Status != 202 {
		t.Fatalf("run: %d %s", run.Status, run.Raw)
	}
	done := waitRun(t, g, fmt.Sprintf("/api/v1/workboard/tasks/%d/runs/%d", taskID, int64(run.JSON["id"].(float64))), 60*time.Second,
		func(r gatewaytest.Response) bool {
			return r.JSON["status"] == "finished" || r.JSON["status"] == "failed"
		})
	if done.JSON["status"] != "finished" || done.JSON["reply"] != "Saved it." {
		t.Fatalf("run %s", done.Raw)
	}
	tools := strings.Join(g.Fake.Calls()[0].Tools, ",")
	if !strings.Contains(tools, "memory_write") || strings.Contains(tools, "memory_write_file") {
		t.Fatalf("tasker's tools %s (memory without files)", tools)
	}
	l := g.DoAs(memAliceKey, "GET", "/api/v1/memory/entries?agent_id=tasker&kind=fact", nil)
	if l.Status != 200 || l.JSON["count"] != float64(1) || !strings.Contains(string(l.Raw), fmt.Sprintf(`"source":"task-%d"`, taskID)) {
		t.Fatalf("the run's memory: %d %s", l.Status, l.Raw)
	}
	// The finished run is archived in the same scope.
	arch := g.DoAs(memAliceKey, "GET", "/api/v1/memory/entries?agent_id=tasker&kind=archive", nil)
	if arch.Status != 200 || arch.JSON["count"] != float64(1) || !strings.Contains(string(arch.Raw), "result: Saved it.") {
		t.Fatalf("the finished run's archive: %d %s", arch.Status, arch.Raw)
	}
	// alice's own chat (no user_id: her own memory) sees it; bob's does not.
	r := g.DoAs(memAliceKey, "POST", "/api/v1/chat", map[string]any{"agent_id": "tasker", "text": "what is due?"})
	if r.Status != 200 || !strings.Contains(lastBody(t, g), "- the launch deadline is friday") {
		t.Fatalf("alice's chat prompt lacks the task run's memory: %s", lastBody(t, g))
	}
	g.DoAs(memBobKey, "POST", "/api/v1/chat", map[string]any{"agent_id": "tasker", "text": "what is due?"})
	if strings.Contains(lastBody(t, g), "deadline") {
		t.Fatalf("bob's prompt holds alice's memory: %s", lastBody(t, g))
	}
}

// agentry memory list|get|delete through the generated client.
func TestCLIMemory(t *testing.T) {
	g := memGateway(t, false)
	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = memAliceKey
	w := g.DoAs(memAliceKey, "POST", "/api/v1/memory/entries", map[string]any{"agent_id": "other", "user_id": "ana", "text": "ana prefers short answers"})
	if w.Status != 201 {
		t.Fatalf("write: %d %s", w.Status, w.Raw)
	}
	id := fmt.Sprint(int64(w.JSON["id"].(float64)))
	r := h.run("memory", "list", "--agent", "other")
	expectCode(t, r, 0, "memory list")
	expectContains(t, r.Stdout, "ana prefers short answers", "memory list row")
	expectContains(t, r.Stdout, "KIND", "memory list header")
	r = h.run("--json", "memory", "list", "--agent", "other", "--user", "ana")
	expectCode(t, r, 0, "memory list --json")
	if v := r.JSON(t); v["count"] != float64(1) {
		t.Fatalf("memory list --json: %s", r.Stdout)
	}
	r = h.run("memory", "list", "--agent", "other", "--user", "bea")
	expectCode(t, r, 0, "memory list another user")
	expectContains(t, r.Stdout, "No memories", "another user's list")
	r = h.run("memory", "get", id, "--agent", "other")
	expectCode(t, r, 0, "memory get")
	expectContains(t, r.Stdout, "ana prefers short answers", "memory get text")
	r = h.run("memory", "get", id, "--agent", "mem")
	expectCode(t, r, 1, "memory get of another agent")
	r = h.runWith(map[string]string{"AGENTRY_API_KEY": memBobKey}, "", "memory", "get", id, "--agent", "other")
	expectCode(t, r, 1, "bob's memory get")
	expectContains(t, r.Stderr, "HTTP 404", "bob's memory get")
	r = h.run("memory", "list")
	expectCode(t, r, 2, "memory list without --agent")
	r = h.run("--json", "memory", "delete", id, "--agent", "other")
	expectCode(t, r, 0, "memory delete")
	r = h.run("memory", "list", "--agent", "other")
	expectContains(t, r.Stdout, "No memories", "after delete")
}
