package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/scrub"
)

// replyKey is the provider key the fake echoes in successful replies. It has
// no credential shape: only the registry of configured values knows it.
const replyKey = "zq9REPLY0provider0key0echoed"

// startReplyLeakGateway runs a gateway whose provider "leaky" (the fake, on
// the OpenAI wire) is configured with replyKey, an agent on it, and extra
// config.
func startReplyLeakGateway(t *testing.T, agent, extra string) *gatewaytest.Gateway {
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: map[string]string{"leaky.yaml": agent}, Config: fmt.Sprintf(`
llm:
  providers:
    leaky: {type: openai, base_url: %q, api_key: %q, default_model: gpt-4o-mini, max_retries: 0}
`, fake.OpenAIBaseURL(), replyKey) + extra})
}

// storedWith counts the session's chat_messages rows whose content or tool
// calls hold s.
func storedWith(t *testing.T, g *gatewaytest.Gateway, sessionID, s string) int64 {
	t.Helper()
	var n int64
	if err := g.Store.DB.Table("chat_messages").Where("session_id = ? AND (content LIKE ? OR tool_calls LIKE ?)", sessionID, "%"+s+"%", "%"+s+"%").
		Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// A provider that echoes its own key in a successful reply: neither the
// /chat answer, nor the /chat/stream text (the key cut into one-character
// deltas), nor the stored conversation carries it (#42 item 5). Fails on
// the code before it, which scrubbed only error texts.
func TestProviderKeyInSuccessfulReplyIsScrubbed(t *testing.T) {
	g := startReplyLeakGateway(t, "id: leaky\nllm: {provider: leaky, model: gpt-4o-mini}\n", "")
	reply := "Sure. Your key is " + replyKey + " — keep it safe; it is " + replyKey + "."
	g.Fake.Script(fakellm.Rule{Contains: "my key", Reply: reply, Chunks: 500})

	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "leaky", "text": "what is my key?"})
	if r.Status != 200 {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
	want := strings.ReplaceAll(reply, replyKey, scrub.Redacted)
	if strings.Contains(string(r.Raw), replyKey) || r.JSON["reply"] != want {
		t.Fatalf("chat answer: %s", r.Raw)
	}
	sid, _ := r.JSON["session_id"].(string)

	resp := postStream(t, g, map[string]any{"agent_id": "leaky", "text": "stream my key"})
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %d %v", resp.StatusCode, err)
	}
	text, events, done := readSSE(t, strings.NewReader(string(raw)))
	if !done || len(events["error"]) != 0 || text != want {
		t.Fatalf("stream text %q (done %v, events %v), want %q", text, done, events, want)
	}
	if last := g.Fake.Calls()[len(g.Fake.Calls())-1]; !last.Stream {
		t.Fatal("the stream did not stream")
	}
	if n := storedWith(t, g, sid, replyKey); n != 0 {
		t.Fatalf("%d chat_messages rows hold the key", n)
	}
	if n := storedWith(t, g, sid, scrub.Redacted); n != 2 {
		t.Fatalf("%d stored replies show [REDACTED], want 2 (chat and stream)", n)
	}
}

// An MCP tool whose answer holds a configured secret: the model (the next
// provider call), the reply and the stored tool message get [REDACTED]. The
// model asks with the key's first letter as a JSON escape, so the
// arguments pass the reply scrub unchanged and the key appears only in the
// tool's answer.
func TestMCPToolOutputIsScrubbed(t *testing.T) {
	url := startMCPHTTP(t, "")
	g := startReplyLeakGateway(t, "id: leaky\nllm: {provider: leaky, model: gpt-4o-mini}\nmcp: [web]\n",
		fmt.Sprintf("runtime: {ssrf: {enabled: true, allow_loopback: true}}\nmcp:\n  web: {url: %q}\n", url))
	escaped := fmt.Sprintf(`{"text":"key: \u%04x%s"}`, replyKey[0], replyKey[1:])
	g.Fake.Script(
		fakellm.Rule{Contains: "echo it", Times: 1, ToolCalls: []fakellm.ToolCall{{Name: "mcp__web__echo", Arguments: json.RawMessage(escaped)}}},
		fakellm.Rule{Contains: "key: ", Times: 1, Reply: "The tool said something."},
	)
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "leaky", "text": "echo it"})
	if r.Status != 200 || r.JSON["reply"] != "The tool said something." {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
	calls := g.Fake.Calls()
	second := string(calls[len(calls)-1].Body)
	if strings.Contains(second, replyKey) || !strings.Contains(second, scrub.Redacted) {
		t.Fatalf("the model was shown the tool's answer %s", second)
	}
	sid, _ := r.JSON["session_id"].(string)
	if storedWith(t, g, sid, replyKey) != 0 || storedWith(t, g, sid, scrub.Redacted) != 1 {
		t.Fatal("the stored tool message holds the key")
	}
}

// A task run (the durable path: the LLM turn activity, the run log, the
// run's reply) whose provider echoes its key in a successful answer records
// and answers [REDACTED].
func TestProviderKeyInTaskRunReplyIsScrubbed(t *testing.T) {
	g := startReplyLeakGateway(t, "id: leaky\nllm: {provider: leaky, model: gpt-4o-mini}\n", "")
	g.Fake.Script(fakellm.Rule{Reply: "Task done; the key is " + replyKey + "."})
	taskID := wbCreateTask(t, g, map[string]any{"title": "report the key", "agent_id": "leaky"})
	started := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, started, 202, "start run")
	runPath := fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, wbID(t, started))
	done := waitRun(t, g, runPath, 60*time.Second, func(r gatewaytest.Response) bool {
		return r.JSON["status"] != "running" && r.JSON["status"] != "queued"
	})
	if done.JSON["status"] != "finished" || done.JSON["reply"] != "Task done; the key is "+scrub.Redacted+"." || strings.Contains(string(done.Raw), replyKey) {
		t.Fatalf("run: %s", done.Raw)
	}
}
