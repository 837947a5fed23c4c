package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fixture serves one recorded provider response and keeps what the client sent.
type fixture struct {
	srv    *httptest.Server
	mu     sync.Mutex
	path   string
	header http.Header
	body   map[string]any
}

func serveFixture(t *testing.T, file, contentType string, headers map[string]string) *fixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(reqBody, &m)
		f.mu.Lock()
		f.path, f.header, f.body = r.URL.Path, r.Header.Clone(), m
		f.mu.Unlock()
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(raw)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) request() (string, http.Header, map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.path, f.header, f.body
}

func fixtureProvider(t *testing.T, typ, base string) Provider {
	t.Helper()
	p, err := NewProvider("fx-"+typ, ProviderConfig{Type: typ, BaseURL: base, APIKey: "sk-test-0000", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func collect(t *testing.T) (func(string) error, func() []string) {
	var mu sync.Mutex
	var parts []string
	return func(s string) error {
			mu.Lock()
			parts = append(parts, s)
			mu.Unlock()
			return nil
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), parts...)
		}
}

func argsMap(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("tool arguments %s: %v", raw, err)
	}
	return m
}

func TestOpenAIFixtureChatUsageDetails(t *testing.T) {
	fx := serveFixture(t, "openai_chat.json", "application/json", map[string]string{"x-request-id": "req_8a1b"})
	p := fixtureProvider(t, TypeOpenAI, fx.srv.URL+"/v1")
	resp, err := p.Chat(context.Background(), Request{Model: "gpt-4o", Messages: []Message{{Role: RoleUser, Content: "describe"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Content, "The image shows a wooden boardwalk") || resp.FinishReason != "stop" {
		t.Fatalf("content/finish: %q %q", resp.Content, resp.FinishReason)
	}
	want := Usage{InputTokens: 2006, OutputTokens: 300, CachedInputTokens: 1920, ReasoningTokens: 192}
	if resp.Usage != want || !resp.UsageReported {
		t.Fatalf("usage = %+v (reported %v), want %+v", resp.Usage, resp.UsageReported, want)
	}
	if resp.RequestID != "req_8a1b" || resp.Model != "gpt-4o-2024-08-06" || resp.Attempts != 1 {
		t.Fatalf("request id %q model %q attempts %d", resp.RequestID, resp.Model, resp.Attempts)
	}
	path, hdr, body := fx.request()
	if path != "/v1/chat/completions" || hdr.Get("Authorization") != "Bearer sk-test-0000" {
		t.Fatalf("path %q auth %q", path, hdr.Get("Authorization"))
	}
	if body["stream"] != nil || body["model"] != "gpt-4o" {
		t.Fatalf("body: %v", body)
	}
}

func TestOpenAIFixtureToolCallsAndResponseIDFallback(t *testing.T) {
	fx := serveFixture(t, "openai_chat_tool_calls.json", "application/json", nil)
	p := fixtureProvider(t, TypeOpenAI, fx.srv.URL+"/v1")
	resp, err := p.Chat(context.Background(), Request{Model: "gpt-4o-mini", Messages: []Message{{Role: RoleUser, Content: "weather?"}},
		Tools: []Tool{{Name: "get_current_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}}}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.RequestID != "chatcmpl-abc123" {
		t.Fatalf("request id fallback = %q", resp.RequestID)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "call_abc123" || resp.ToolCalls[0].Name != "get_current_weather" {
		t.Fatalf("tool calls: %+v", resp.ToolCalls)
	}
	if argsMap(t, resp.ToolCalls[0].Arguments)["location"] != "Boston, MA" {
		t.Fatalf("arguments: %s", resp.ToolCalls[0].Arguments)
	}
	if resp.Content != "" || resp.FinishReason != "tool_calls" {
		t.Fatalf("content %q finish %q", resp.Content, resp.FinishReason)
	}
	if want := (Usage{InputTokens: 82, OutputTokens: 17}); resp.Usage != want {
		t.Fatalf("usage %+v", resp.Usage)
	}
}

func TestOpenAIFixtureStreamWithFinalUsageChunk(t *testing.T) {
	fx := serveFixture(t, "openai_stream.sse", "text/event-stream", map[string]string{"x-request-id": "req_stream"})
	p := fixtureProvider(t, TypeOpenAI, fx.srv.URL+"/v1")
	onDelta, parts := collect(t)
	resp, err := p.Stream(context.Background(), Request{Model: "gpt-4o-mini", Messages: []Message{{Role: RoleUser, Content: "hi"}}}, onDelta)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(parts(), "|"); got != "Hello|, checking the weather." {
		t.Fatalf("deltas %q", got)
	}
	if resp.Content != "Hello, checking the weather." {
		t.Fatalf("content %q", resp.Content)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "call_DdmO9pD3xa9XTPNJ32zg2hcA" || resp.ToolCalls[0].Name != "get_weather" {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	if argsMap(t, resp.ToolCalls[0].Arguments)["location"] != "Paris, France" {
		t.Fatalf("arguments %s", resp.ToolCalls[0].Arguments)
	}
	want := Usage{InputTokens: 1200, OutputTokens: 140, CachedInputTokens: 1024, ReasoningTokens: 64}
	if resp.Usage != want || !resp.UsageReported || resp.FinishReason != "tool_calls" || resp.RequestID != "req_stream" {
		t.Fatalf("resp %+v", resp)
	}
	_, _, body := fx.request()
	so, _ := body["stream_options"].(map[string]any)
	if body["stream"] != true || so["include_usage"] != true {
		t.Fatalf("stream request body: %v", body)
	}
}

func TestAnthropicFixtureMessageUsageAndToolUse(t *testing.T) {
	fx := serveFixture(t, "anthropic_message.json", "application/json", map[string]string{"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
	p := fixtureProvider(t, TypeAnthropic, fx.srv.URL)
	resp, err := p.Chat(context.Background(), Request{Model: "claude-sonnet-4-5", Messages: []Message{
		{Role: RoleSystem, Content: "be brief"}, {Role: RoleUser, Content: "weather in SF?"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{InputTokens: 21 + 188086, OutputTokens: 393, CacheCreationTokens: 188086}
	if resp.Usage != want || !resp.UsageReported {
		t.Fatalf("usage %+v want %+v", resp.Usage, want)
	}
	if resp.RequestID != "req_011CSHoEeqs5C35K2UUqR7Fy" || resp.FinishReason != "tool_use" {
		t.Fatalf("request id %q finish %q", resp.RequestID, resp.FinishReason)
	}
	if resp.Content != "I'll check the current weather in San Francisco for you." {
		t.Fatalf("content %q", resp.Content)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "toolu_01A09q90qw90lq917835lq9" || argsMap(t, resp.ToolCalls[0].Arguments)["unit"] != "celsius" {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	path, hdr, body := fx.request()
	if path != "/v1/messages" || hdr.Get("x-api-key") != "sk-test-0000" || hdr.Get("anthropic-version") != "2023-06-01" {
		t.Fatalf("path %q headers %v", path, hdr)
	}
	if body["system"] != "be brief" || body["max_tokens"] != float64(DefaultAnthropicMaxTokens) {
		t.Fatalf("body %v", body)
	}
}

func TestAnthropicFixtureStreamUsageFromStartAndDelta(t *testing.T) {
	fx := serveFixture(t, "anthropic_stream.sse", "text/event-stream", map[string]string{"request-id": "req_stream_a"})
	p := fixtureProvider(t, TypeAnthropic, fx.srv.URL)
	onDelta, parts := collect(t)
	resp, err := p.Stream(context.Background(), Request{Model: "claude-sonnet-4-5", Messages: []Message{{Role: RoleUser, Content: "weather"}}}, onDelta)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(parts(), "|") != "Okay|, let's check the weather for San Francisco, CA:" {
		t.Fatalf("deltas %q", parts())
	}
	want := Usage{InputTokens: 472 + 2048, OutputTokens: 89, CachedInputTokens: 2048}
	if resp.Usage != want || !resp.UsageReported {
		t.Fatalf("usage %+v want %+v", resp.Usage, want)
	}
	if resp.RequestID != "req_stream_a" || resp.Model != "claude-sonnet-4-5-20250929" || resp.FinishReason != "tool_use" {
		t.Fatalf("resp %+v", resp)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "get_weather" || argsMap(t, resp.ToolCalls[0].Arguments)["location"] != "San Francisco, CA" {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
}

func TestOllamaFixtureDoneMessage(t *testing.T) {
	fx := serveFixture(t, "ollama_chat.json", "application/json", nil)
	p := fixtureProvider(t, TypeOllama, fx.srv.URL)
	resp, err := p.Chat(context.Background(), Request{Model: "llama3.2", Messages: []Message{{Role: RoleUser, Content: "hello"}}, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Hello! How are you today?" || resp.FinishReason != "stop" || resp.RequestID != "" {
		t.Fatalf("resp %+v", resp)
	}
	if want := (Usage{InputTokens: 26, OutputTokens: 298}); resp.Usage != want || !resp.UsageReported {
		t.Fatalf("usage %+v", resp.Usage)
	}
	path, _, body := fx.request()
	opts, _ := body["options"].(map[string]any)
	if path != "/api/chat" || body["stream"] != false || opts["num_predict"] != float64(64) {
		t.Fatalf("request %q %v", path, body)
	}
}

func TestOllamaFixtureToolCallsWithoutIDs(t *testing.T) {
	fx := serveFixture(t, "ollama_chat_tool_calls.json", "application/json", nil)
	p := fixtureProvider(t, TypeOllama, fx.srv.URL)
	resp, err := p.Chat(context.Background(), Request{Model: "llama3.2", Messages: []Message{{Role: RoleUser, Content: "weather in Paris"}},
		Tools: []Tool{{Name: "get_current_weather"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "get_current_weather" || !strings.HasPrefix(resp.ToolCalls[0].ID, "call_") {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	if argsMap(t, resp.ToolCalls[0].Arguments)["location"] != "Paris, FR" {
		t.Fatalf("args %s", resp.ToolCalls[0].Arguments)
	}
	if resp.Usage != (Usage{InputTokens: 122, OutputTokens: 33}) {
		t.Fatalf("usage %+v", resp.Usage)
	}
}

func TestOllamaFixtureStream(t *testing.T) {
	fx := serveFixture(t, "ollama_stream.ndjson", "application/x-ndjson", nil)
	p := fixtureProvider(t, TypeOllama, fx.srv.URL)
	onDelta, parts := collect(t)
	resp, err := p.Stream(context.Background(), Request{Model: "llama3.2", Messages: []Message{{Role: RoleUser, Content: "why is the sky blue?"}}}, onDelta)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts()) != 3 || resp.Content != "The sky is blue." {
		t.Fatalf("deltas %q content %q", parts(), resp.Content)
	}
	if resp.Usage != (Usage{InputTokens: 26, OutputTokens: 282}) || !resp.UsageReported {
		t.Fatalf("usage %+v", resp.Usage)
	}
	_, _, body := fx.request()
	if body["stream"] != true {
		t.Fatalf("body %v", body)
	}
}
