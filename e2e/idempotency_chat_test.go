package e2e

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestChatToolCallsGetDistinctIdempotencyKeys: in chat (the in-process
// path) every tool call gets a key of its own: two http_get calls of one
// turn, and the same calls when the request is sent again, reach a real
// endpoint with four different keys.
func TestChatToolCallsGetDistinctIdempotencyKeys(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.Write([]byte("posted"))
	}))
	defer api.Close()
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"poster.yaml": "id: poster\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [http_get]\nmax_turns: 3\n"},
		Config: "runtime: {ssrf: {enabled: true, allow_loopback: true}}\n",
	})
	g.Fake.Script(
		fakellm.Rule{Contains: "posted", Reply: "Both posted."},
		fakellm.Rule{Contains: "post twice", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("http_get", map[string]any{"url": api.URL + "/a"}),
			fakellm.NewToolCall("http_get", map[string]any{"url": api.URL + "/b"}),
		}},
	)
	for i := 0; i < 2; i++ {
		r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "poster", "text": "post twice", "user_id": "u1"})
		if r.Status != 200 || r.JSON["reply"] != "Both posted." {
			t.Fatalf("chat %d: %d %s", i, r.Status, r.Raw)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	hex := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for _, k := range keys {
		if !hex.MatchString(k) || seen[k] {
			t.Fatalf("keys %q: want four distinct 32-hex keys", keys)
		}
		seen[k] = true
	}
	if len(keys) != 4 {
		t.Fatalf("%d requests, want 4", len(keys))
	}
}
