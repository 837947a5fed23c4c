package llm

import (
	"encoding/json"
	"strings"
	"testing"
)

// conversationWithTools is a turn after a tool call: every message kind the clients must encode.
func conversationWithTools() Request {
	temp := 0.2
	return Request{
		Model: "m",
		Messages: []Message{
			{Role: RoleSystem, Content: "You write reports."},
			{Role: RoleUser, Content: "write the report"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "call_1", Name: "write_file", Arguments: json.RawMessage(`{"path":"report.md","content":"# R"}`)},
				{ID: "call_2", Name: "read_file", Arguments: nil},
			}},
			{Role: RoleTool, ToolCallID: "call_1", Name: "write_file", Content: "wrote 3 bytes"},
			{Role: RoleTool, ToolCallID: "call_2", Name: "read_file", Content: "no such file"},
			{Role: RoleUser, Content: "thanks"},
		},
		Tools: []Tool{
			{Name: "write_file", Description: "write a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Name: "read_file"},
		},
		ToolChoice:    "write_file",
		Temperature:   &temp,
		MaxTokens:     256,
		PromptCaching: true,
	}
}

func encode(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpenAIRequestEncoding(t *testing.T) {
	c := &openAIClient{httpBase: &httpBase{base: "http://127.0.0.1:8000/v1"}}
	body := encode(t, c.buildRequest(conversationWithTools(), false))
	msgs := body["messages"].([]any)
	if len(msgs) != 6 {
		t.Fatalf("messages: %v", msgs)
	}
	asst := msgs[2].(map[string]any)
	if asst["content"] != nil {
		t.Fatalf("assistant content with tool calls must be null: %v", asst)
	}
	calls := asst["tool_calls"].([]any)
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	if fn["arguments"] != `{"path":"report.md","content":"# R"}` || calls[1].(map[string]any)["function"].(map[string]any)["arguments"] != "{}" {
		t.Fatalf("tool call arguments must be JSON strings: %v", calls)
	}
	if tool := msgs[3].(map[string]any); tool["tool_call_id"] != "call_1" || tool["role"] != "tool" {
		t.Fatalf("tool message: %v", tool)
	}
	choice := body["tool_choice"].(map[string]any)
	if choice["type"] != "function" || choice["function"].(map[string]any)["name"] != "write_file" {
		t.Fatalf("tool_choice: %v", choice)
	}
	tools := body["tools"].([]any)
	if params := tools[1].(map[string]any)["function"].(map[string]any)["parameters"].(map[string]any); params["type"] != "object" {
		t.Fatalf("empty parameters need an object schema: %v", params)
	}
	if body["max_tokens"] != float64(256) || body["max_completion_tokens"] != nil || body["temperature"] != 0.2 {
		t.Fatalf("limits: %v", body)
	}

	official := &openAIClient{httpBase: &httpBase{base: "https://api.openai.com/v1"}}
	body = encode(t, official.buildRequest(conversationWithTools(), true))
	if body["max_completion_tokens"] != float64(256) || body["max_tokens"] != nil {
		t.Fatalf("api.openai.com wants max_completion_tokens: %v", body)
	}
	if so := body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("stream_options: %v", body)
	}

	noTools := conversationWithTools()
	noTools.Tools = nil
	if body = encode(t, c.buildRequest(noTools, false)); body["tool_choice"] != nil {
		t.Fatalf("tool_choice without tools is rejected by providers: %v", body)
	}
}

func TestAnthropicRequestEncoding(t *testing.T) {
	c := &anthropicClient{httpBase: &httpBase{base: "https://api.anthropic.com"}}
	req := conversationWithTools()
	req.ToolChoice = ToolChoiceRequired
	body := encode(t, c.buildRequest(req, false))
	sys := body["system"].([]any)[0].(map[string]any)
	if sys["text"] != "You write reports." || sys["cache_control"].(map[string]any)["type"] != "ephemeral" {
		t.Fatalf("system with caching: %v", body["system"])
	}
	msgs := body["messages"].([]any)
	// user, assistant(tool_use x2), user(tool_result x2 + text)
	if len(msgs) != 3 {
		t.Fatalf("messages must alternate: %v", msgs)
	}
	asst := msgs[1].(map[string]any)["content"].([]any)
	if len(asst) != 2 || asst[0].(map[string]any)["type"] != "tool_use" || asst[1].(map[string]any)["input"] == nil {
		t.Fatalf("assistant blocks: %v", asst)
	}
	last := msgs[2].(map[string]any)
	blocks := last["content"].([]any)
	if last["role"] != "user" || len(blocks) != 3 || blocks[0].(map[string]any)["type"] != "tool_result" ||
		blocks[0].(map[string]any)["tool_use_id"] != "call_1" || blocks[2].(map[string]any)["text"] != "thanks" {
		t.Fatalf("tool results merged into one user turn: %v", last)
	}
	if body["tool_choice"].(map[string]any)["type"] != "any" || body["max_tokens"] != float64(256) {
		t.Fatalf("tool_choice/max_tokens: %v", body)
	}
	if _, ok := body["tools"].([]any)[0].(map[string]any)["input_schema"]; !ok {
		t.Fatalf("tools need input_schema: %v", body["tools"])
	}

	req.PromptCaching = false
	if body = encode(t, c.buildRequest(req, true)); body["system"] != "You write reports." || body["stream"] != true {
		t.Fatalf("plain system string without caching: %v", body["system"])
	}
	if strings.Contains(mustJSON(t, body), "cache_control") {
		t.Fatal("cache_control sent although caching is off")
	}
}

func mustJSON(t *testing.T, v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestOllamaRequestEncoding(t *testing.T) {
	c := &ollamaClient{httpBase: &httpBase{base: DefaultOllamaBaseURL}}
	body := encode(t, c.buildRequest(conversationWithTools(), false))
	if body["stream"] != false {
		t.Fatalf("stream must be sent explicitly: %v", body)
	}
	opts := body["options"].(map[string]any)
	if opts["num_predict"] != float64(256) || opts["temperature"] != 0.2 {
		t.Fatalf("options %v", opts)
	}
	msgs := body["messages"].([]any)
	args := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"]
	if args.(map[string]any)["path"] != "report.md" {
		t.Fatalf("ollama arguments must be an object: %v", args)
	}
	if tool := msgs[3].(map[string]any); tool["tool_name"] != "write_file" {
		t.Fatalf("tool message %v", tool)
	}
	none := conversationWithTools()
	none.ToolChoice = ToolChoiceNone
	if body = encode(t, c.buildRequest(none, false)); body["tools"] != nil {
		t.Fatalf("tool_choice none drops the tools for ollama: %v", body["tools"])
	}
}

func TestNormaliseArguments(t *testing.T) {
	for in, want := range map[string]string{
		"":               `{}`,
		"  ":             `{}`,
		`{"a":1}`:        `{"a":1}`,
		`{"a":1`:         `"{\"a\":1"`,
		"{\n\"b\": 2\n}": "{\n\"b\": 2\n}",
	} {
		if got := string(normaliseArguments([]byte(in))); got != want {
			t.Errorf("normaliseArguments(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestNewProviderValidation(t *testing.T) {
	if _, err := NewProvider("x", ProviderConfig{Type: "gemini"}); err == nil || !strings.Contains(err.Error(), `"gemini"`) {
		t.Fatalf("unknown type must be named: %v", err)
	}
	if _, err := NewProvider("local-vllm", ProviderConfig{}); err == nil || !strings.Contains(err.Error(), "type is required") {
		t.Fatalf("missing type: %v", err)
	}
	if _, err := NewProvider("x", ProviderConfig{Type: "openai", BaseURL: "ftp://host"}); err == nil {
		t.Fatal("non-http base url accepted")
	}
	if _, err := NewProvider("x", ProviderConfig{Type: "openai", BaseURL: "https://user:secret@host/v1"}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("credentials in URL: %v", err)
	}
	p, err := NewProvider("ollama", ProviderConfig{})
	if err != nil || p.ID() != "ollama" || p.Address() != "http://127.0.0.1:11434" {
		t.Fatalf("default ollama: %v %v", p, err)
	}
	p, err = NewProvider("claude", ProviderConfig{Type: "Anthropic", BaseURL: "https://api.anthropic.com/v1/"})
	if err != nil || p.Address() != "https://api.anthropic.com" {
		t.Fatalf("anthropic base with /v1: %v %v", p, err)
	}
	p, _ = NewProvider("openai", ProviderConfig{})
	if p.Address() != DefaultOpenAIBaseURL {
		t.Fatalf("default openai address %q", p.Address())
	}
}
