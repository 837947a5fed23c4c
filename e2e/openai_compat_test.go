package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// Issue 51: the agents behind the OpenAI Chat Completions protocol and as
// MCP tools, driven by the official clients (openai-go, the OpenAI Node
// SDK, the MCP Go SDK) against a real gateway and the fake provider.

const limitedKey = "limited-key-0123456789abcdef"

func startCompatGateway(t *testing.T) *gatewaytest.Gateway {
	t.Helper()
	return gatewaytest.Start(t, gatewaytest.Options{
		Config: `
auth:
  keys:
    - {subject: app, key: ` + limitedKey + `, role: member, agents: [other]}
costs:
  enforcement_mode: hard
  per_agent_daily_budget_usd: 0.00001
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`,
		Agents: map[string]string{
			"helper.yaml": "id: helper\ndescription: Answers questions about the test.\nllm: {provider: openai, model: gpt-4o-mini}\nsystem_prompt: You help.\n",
			"other.yaml":  "id: other\ndescription: Another agent.\nllm: {provider: openai, model: gpt-4o-mini}\n",
			// An output token costs $0.0001: the $0.00001 agent budget covers none, so every call is refused.
			"exact.yaml":  exactAgent,
			"exact2.yaml": "id: exact2\nllm: {provider: openai, model: exact, max_tokens: 100}\n",
		},
	})
}

func TestOpenAICompatGoSDK(t *testing.T) {
	g := startCompatGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(g.URL()+"/v1"), option.WithAPIKey(gatewaytest.TestAPIKey), option.WithMaxRetries(0))

	// Non-streaming: earlier turns sent as given, overrides mapped.
	before := g.Fake.CallCount()
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "agent/helper",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("ignored: the agent's prompt governs"),
			openai.UserMessage("first question"), openai.AssistantMessage("first answer"), openai.UserMessage("hello go"),
		},
		User: openai.String("go-user"), MaxTokens: openai.Int(77), Temperature: openai.Float(0.2),
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != "echo: hello go" || resp.Object != "chat.completion" || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("completion: %+v", resp)
	}
	if resp.Usage.CompletionTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Fatalf("usage: %+v", resp.Usage)
	}
	calls := g.Fake.Calls()[before:]
	if len(calls) != 1 || calls[0].MessageCount != 4 || calls[0].MaxTokens != 77 {
		t.Fatalf("provider saw %+v, want one call of system + 2 earlier turns + the user turn, max_tokens 77", calls)
	}
	rows := ledgerOf(t, g, "openai_compat")
	if len(rows) != 1 || rows[0].Outcome != "succeeded" || rows[0].InputTokens != resp.Usage.PromptTokens || rows[0].OutputTokens != resp.Usage.CompletionTokens {
		t.Fatalf("ledger rows of openai_compat: %+v (usage %+v)", rows, resp.Usage)
	}

	// Streaming with the usage chunk.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "helper",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream go please")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := acc.Choices[0].Message.Content; got != "echo: stream go please" || chunks < 3 || acc.Usage.CompletionTokens == 0 {
		t.Fatalf("stream: %d chunks, %q, usage %+v", chunks, got, acc.Usage)
	}

	// The models the key may use.
	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "agent/exact,agent/exact2,agent/helper,agent/other" {
		t.Fatalf("models: %v", ids)
	}
	limited := openai.NewClient(option.WithBaseURL(g.URL()+"/v1"), option.WithAPIKey(limitedKey), option.WithMaxRetries(0))
	if page, err := limited.Models.List(ctx); err != nil || len(page.Data) != 1 || page.Data[0].ID != "agent/other" {
		t.Fatalf("limited key's models: %+v %v", page, err)
	}

	// A key that may not use the agent: 403, a typed API error.
	before = g.Fake.CallCount()
	_, err = limited.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agent/helper",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	expectAPIError(t, err, 403, "forbidden", "")

	// A budget that does not cover the call: a typed 402, streaming too.
	budget := openai.ChatCompletionNewParams{Model: "agent/exact", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("spend")}}
	_, err = client.Chat.Completions.New(ctx, budget)
	e := expectAPIError(t, err, 402, "budget_exceeded", "")
	if e.Type != "insufficient_quota" {
		t.Fatalf("budget error type %q", e.Type)
	}
	s := client.Chat.Completions.NewStreaming(ctx, budget)
	for s.Next() {
	}
	expectAPIError(t, s.Err(), 402, "budget_exceeded", "")
	if n := g.Fake.CallCount(); n != before {
		t.Fatalf("refused calls reached the provider: %d calls", n-before)
	}
}

// expectAPIError asserts err is openai-go's typed API error with the status, code and param.
func expectAPIError(t *testing.T, err error, status int, code, param string) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a typed *openai.Error %d %s, got %T %v", status, code, err, err)
	}
	if e.StatusCode != status || e.Code != code || e.Param != param {
		t.Fatalf("API error: status %d code %q param %q (%s), want %d %q %q", e.StatusCode, e.Code, e.Param, e.Message, status, code, param)
	}
	return e
}

// Bad input: OpenAI-shaped 400s naming the parameter, nothing sent to a provider.
func TestOpenAICompatBadInput(t *testing.T) {
	g := startCompatGateway(t)
	user := []map[string]any{{"role": "user", "content": "hi"}}
	huge := make([]map[string]any, 0, 2600)
	for range 2600 {
		huge = append(huge, map[string]any{"role": "user", "content": strings.Repeat("x", 4000)})
	}
	cases := []struct {
		name  string
		body  map[string]any
		param string
		code  string
	}{
		{"unknown model", map[string]any{"model": "agent/nope", "messages": user}, "model", "model_not_found"},
		{"no model", map[string]any{"messages": user}, "model", "missing_required_parameter"},
		{"empty messages", map[string]any{"model": "helper", "messages": []any{}}, "messages", "empty_array"},
		{"last not user", map[string]any{"model": "helper", "messages": []map[string]any{{"role": "assistant", "content": "x"}}}, "messages", "invalid_value"},
		{"image", map[string]any{"model": "helper", "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.png"}}}}}},
			"messages[0].content[1].type", "unsupported_content_type"},
		{"audio", map[string]any{"model": "helper", "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "input_audio", "input_audio": map[string]any{"data": "AAAA", "format": "wav"}}}}}},
			"messages[0].content[0].type", "unsupported_content_type"},
		{"n", map[string]any{"model": "helper", "messages": user, "n": 2}, "n", "unsupported_value"},
		{"logprobs", map[string]any{"model": "helper", "messages": user, "logprobs": true}, "logprobs", "unsupported_parameter"},
		{"tools", map[string]any{"model": "helper", "messages": user, "tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "f"}}}}, "tools", "unsupported_parameter"},
		{"tool role", map[string]any{"model": "helper", "messages": []map[string]any{{"role": "tool", "content": "x", "tool_call_id": "a"}, user[0]}}, "messages[0].role", "unsupported_value"},
		{"temperature", map[string]any{"model": "helper", "messages": user, "temperature": 5}, "temperature", "invalid"},
		{"tool_choice", map[string]any{"model": "helper", "messages": user, "tool_choice": "sometimes"}, "tool_choice", "invalid_value"},
		{"10 MB of messages", map[string]any{"model": "helper", "messages": huge}, "messages", "request_too_large"},
	}
	before := g.Fake.CallCount()
	for _, c := range cases {
		r := g.Do("POST", "/v1/chat/completions", c.body)
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Raw, &env); err != nil || r.Status != 400 || env.Error.Type != "invalid_request_error" ||
			env.Error.Param == nil || *env.Error.Param != c.param || env.Error.Code == nil || *env.Error.Code != c.code || env.Error.Message == "" {
			t.Errorf("%s: %d %.300s, want 400 param %s code %s", c.name, r.Status, r.Raw, c.param, c.code)
		}
	}
	if n := g.Fake.CallCount(); n != before {
		t.Fatalf("bad input reached the provider: %d calls", n-before)
	}
	if r := g.DoAs("", "POST", "/v1/chat/completions", map[string]any{"model": "helper", "messages": user}); r.Status != 401 || !strings.Contains(string(r.Raw), `"type":"authentication_error"`) {
		t.Fatalf("no key: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("GET", "/v1/nope", nil); r.Status != 404 || !strings.Contains(string(r.Raw), `"type":"invalid_request_error"`) {
		t.Fatalf("unknown route: %d %s", r.Status, r.Raw)
	}
}

// The official OpenAI Node SDK, as an application runs it.
func TestOpenAICompatNodeSDK(t *testing.T) {
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		t.Skip("!!!!!!!! node/npm not installed: the OpenAI Node SDK test is SKIPPED (dev/provision.sh installs them) !!!!!!!!")
	}
	dir, err := filepath.Abs("../dev/openai-node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--cache", filepath.Join(os.TempDir(), "agentry-npm-cache"))
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("!!!!!!!! npm ci in dev/openai-node failed (offline?): the OpenAI Node SDK test is SKIPPED: %v\n%s !!!!!!!!", err, out)
		}
	}
	g := startCompatGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+g.URL()+"/v1", "OPENAI_API_KEY="+gatewaytest.TestAPIKey, "MODEL=agent/helper", "BUDGET_MODEL=agent/exact2")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("check.mjs: %v\n%s\n%s", err, out, ee.Stderr)
		}
		t.Fatal(err)
	}
	type apiErr struct {
		OK     bool   `json:"ok"`
		Typed  bool   `json:"typed"`
		Class  string `json:"class"`
		Status int    `json:"status"`
		Code   string `json:"code"`
		Type   string `json:"type"`
		Param  string `json:"param"`
	}
	var res struct {
		Reply        string `json:"reply"`
		FinishReason string `json:"finish_reason"`
		Object       string `json:"object"`
		Usage        struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
		Stream struct {
			Text         string `json:"text"`
			Chunks       int    `json:"chunks"`
			FinishReason string `json:"finish_reason"`
			Usage        *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		} `json:"stream"`
		Models       []string `json:"models"`
		BudgetFirst  apiErr   `json:"budget_first"`
		BudgetSecond apiErr   `json:"budget_second"`
		BudgetStream apiErr   `json:"budget_stream"`
		BadN         apiErr   `json:"bad_n"`
		Unknown      apiErr   `json:"unknown_model"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("check.mjs printed %s: %v", out, err)
	}
	if res.Reply != "echo: hello from node" || res.FinishReason != "stop" || res.Object != "chat.completion" || res.Usage.TotalTokens == 0 {
		t.Errorf("non-streaming: %s", out)
	}
	if res.Stream.Text != "echo: stream from node" || res.Stream.FinishReason != "stop" || res.Stream.Usage == nil || res.Stream.Usage.CompletionTokens == 0 {
		t.Errorf("streaming: %s", out)
	}
	if len(res.Models) != 4 {
		t.Errorf("models: %v", res.Models)
	}
	for name, e := range map[string]apiErr{"budget": res.BudgetFirst, "budget again": res.BudgetSecond, "budget stream": res.BudgetStream} {
		if !e.Typed || e.Status != 402 || e.Code != "budget_exceeded" || e.Type != "insufficient_quota" {
			t.Errorf("%s: want a typed APIError 402 budget_exceeded, got %+v", name, e)
		}
	}
	if !res.BadN.Typed || res.BadN.Class != "BadRequestError" || res.BadN.Param != "n" {
		t.Errorf("n=2: %+v", res.BadN)
	}
	if !res.Unknown.Typed || res.Unknown.Status != 400 || res.Unknown.Param != "model" || res.Unknown.Code != "model_not_found" {
		t.Errorf("unknown model: %+v", res.Unknown)
	}
	if rows := ledgerOf(t, g, "openai_compat"); len(rows) < 3 {
		t.Errorf("ledger rows of openai_compat: %d", len(rows))
	}
}

// ledgerOf is the ledger's rows of one source (surface).
func ledgerOf(t *testing.T, g *gatewaytest.Gateway, source string) []ledgerRow {
	var rows []ledgerRow
	for _, r := range ledger(t, g, "") {
		if r.Source == source {
			rows = append(rows, r)
		}
	}
	return rows
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// The gateway as an MCP server, driven by the official Go SDK's client.
func TestMCPServerAgentsAsTools(t *testing.T) {
	g := startCompatGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(key string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.URL() + "/mcp", HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := connect(gatewaytest.TestAPIKey)
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	helper := byName["ask_helper"]
	if len(byName) != 4 || helper == nil || helper.Description != "Answers questions about the test." {
		t.Fatalf("tools: %+v", tools.Tools)
	}
	schema, _ := json.Marshal(helper.InputSchema)
	if !strings.Contains(string(schema), `"text"`) || !strings.Contains(string(schema), `"user_id"`) {
		t.Fatalf("ask_helper schema: %s", schema)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "ask_helper", Arguments: map[string]any{"text": "hello mcp", "user_id": "mcp-user"}})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "echo: hello mcp" {
		t.Fatalf("call: %+v %v", res, err)
	}
	if rows := ledgerOf(t, g, "mcp_server"); len(rows) != 1 || rows[0].Outcome != "succeeded" {
		t.Fatalf("ledger rows of mcp_server: %+v", rows)
	}
	// Governance: the budget refuses the call, as a tool error naming it.
	before := g.Fake.CallCount()
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "ask_exact", Arguments: map[string]any{"text": "spend"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "budget_exceeded") || g.Fake.CallCount() != before {
		t.Fatalf("over budget: %+v %v", res, err)
	}
	// A key limited to one agent sees one tool.
	lt, err := connect(limitedKey).ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 1 || lt.Tools[0].Name != "ask_other" {
		t.Fatalf("limited key's tools: %+v %v", lt, err)
	}
	// Without a key: 401.
	if r := g.DoAs("", "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); r.Status != 401 {
		t.Fatalf("no key: %d %s", r.Status, r.Raw)
	}
}
