package llm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
)

var allTypes = []string{TypeOpenAI, TypeAnthropic, TypeOllama}

func startFake(t testing.TB) *fakellm.Server {
	t.Helper()
	f := fakellm.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func fakeConfig(f *fakellm.Server, typ string) ProviderConfig {
	base := f.URL()
	if typ == TypeOpenAI {
		base = f.OpenAIBaseURL()
	}
	return ProviderConfig{Type: typ, BaseURL: base, APIKey: "test-key-abcd"}
}

// fakeProvider is a client of the fake with retries whose waits are recorded instead of slept.
func fakeProvider(t testing.TB, f *fakellm.Server, typ string, waits *[]string) Provider {
	t.Helper()
	p, err := NewProvider(typ, fakeConfig(f, typ))
	if err != nil {
		t.Fatal(err)
	}
	pol := DefaultRetryPolicy()
	pol.sleep = func(ctx context.Context, d time.Duration) error {
		if waits != nil {
			*waits = append(*waits, d.String())
		}
		return ctx.Err()
	}
	return WithRetry(p, pol)
}

func userReq(model, text string) Request {
	return Request{Model: model, Messages: []Message{{Role: RoleSystem, Content: "sys"}, {Role: RoleUser, Content: text}}}
}

func TestFakeChatAndStreamEveryFormat(t *testing.T) {
	f := startFake(t)
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			p := fakeProvider(t, f, typ, nil)
			resp, err := p.Chat(context.Background(), userReq("m1", "hello there"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "echo: hello there" || !resp.UsageReported || resp.Usage.InputTokens < 1 || resp.Usage.OutputTokens < 1 {
				t.Fatalf("chat %+v", resp)
			}
			if typ != TypeOllama && !strings.HasPrefix(resp.RequestID, "req_fake_") {
				t.Fatalf("request id %q", resp.RequestID)
			}
			onDelta, parts := collect(t)
			resp, err = p.Stream(context.Background(), userReq("m1", "stream this please"), onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if len(parts()) < 2 || strings.Join(parts(), "") != "echo: stream this please" || resp.Content != "echo: stream this please" {
				t.Fatalf("stream deltas %q content %q", parts(), resp.Content)
			}
			if !resp.UsageReported || resp.Attempts != 1 {
				t.Fatalf("stream resp %+v", resp)
			}
			last := f.Calls()[len(f.Calls())-1]
			if last.Format != typ || !last.Stream || last.LastUserMessage != "stream this please" || last.KeyHint != "abcd" {
				t.Fatalf("record %+v", last)
			}
		})
	}
}

func TestFakeToolCallsAndCustomUsageEveryFormat(t *testing.T) {
	f := startFake(t)
	usage := &fakellm.Usage{InputTokens: 1000, OutputTokens: 50, CachedInputTokens: 600, CacheCreationTokens: 100, ReasoningTokens: 20}
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			f.Script(fakellm.Rule{
				Contains:  "write the report",
				Reply:     "Writing it.",
				ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("write_file", map[string]string{"path": "report.md", "content": "# Report\n"})},
				Usage:     usage,
			})
			p := fakeProvider(t, f, typ, nil)
			req := userReq("m", "please write the report")
			req.Tools = []Tool{{Name: "write_file", Parameters: json.RawMessage(`{"type":"object"}`)}}
			for _, stream := range []bool{false, true} {
				var resp *Response
				var err error
				if stream {
					resp, err = p.Stream(context.Background(), req, nil)
				} else {
					resp, err = p.Chat(context.Background(), req)
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "write_file" || resp.ToolCalls[0].ID == "" {
					t.Fatalf("stream=%v tool calls %+v", stream, resp.ToolCalls)
				}
				if args := argsMap(t, resp.ToolCalls[0].Arguments); args["path"] != "report.md" || args["content"] != "# Report\n" {
					t.Fatalf("stream=%v args %s", stream, resp.ToolCalls[0].Arguments)
				}
				if resp.Content != "Writing it." {
					t.Fatalf("stream=%v content %q", stream, resp.Content)
				}
				want := Usage{InputTokens: 1000, OutputTokens: 50, CachedInputTokens: 600, CacheCreationTokens: 100, ReasoningTokens: 20}
				switch typ {
				case TypeOpenAI: // no cache-creation counter in this format
					want.CacheCreationTokens = 0
				case TypeAnthropic: // no reasoning counter
					want.ReasoningTokens = 0
				case TypeOllama: // only prompt_eval_count and eval_count
					want = Usage{InputTokens: 1000, OutputTokens: 50}
				}
				if resp.Usage != want || !resp.UsageReported {
					t.Fatalf("stream=%v usage %+v want %+v", stream, resp.Usage, want)
				}
			}
			// The result goes back in the next turn and is understood by the fake.
			req.Messages = append(req.Messages,
				Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_x", Name: "write_file", Arguments: json.RawMessage(`{"path":"report.md"}`)}}},
				Message{Role: RoleTool, ToolCallID: "call_x", Name: "write_file", Content: "ok"})
			resp, err := p.Chat(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "echo: please write the report" {
				t.Fatalf("after tool result: %q", resp.Content)
			}
		})
	}
}

func TestFakeOmittedUsageIsNotReported(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{OmitUsage: true})
	for _, typ := range allTypes {
		p := fakeProvider(t, f, typ, nil)
		resp, err := p.Stream(context.Background(), userReq("m", "x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.UsageReported {
			t.Fatalf("%s: usage reported without usage: %+v", typ, resp)
		}
	}
}

func TestStreamCutMidwayReturnsPartialContentAndError(t *testing.T) {
	f := startFake(t)
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			f.Reset()
			f.Script(fakellm.Rule{Reply: "one two three four five six", Chunks: 6, CutAfterChunks: 2})
			p := fakeProvider(t, f, typ, nil)
			onDelta, parts := collect(t)
			resp, err := p.Stream(context.Background(), userReq("m", "go"), onDelta)
			if err == nil || !errors.Is(err, ErrStreamIncomplete) {
				t.Fatalf("want ErrStreamIncomplete, got %v", err)
			}
			var pe *ProviderError
			if !errors.As(err, &pe) || pe.Unreachable {
				t.Fatalf("want a ProviderError, got %T %v", err, err)
			}
			if resp == nil || resp.Content == "" || resp.Content != strings.Join(parts(), "") || len(parts()) != 2 {
				t.Fatalf("partial content %+v parts %q", resp, parts())
			}
			if resp.UsageReported {
				t.Fatal("a cut stream has no reported usage")
			}
			if f.CallCount() != 1 {
				t.Fatalf("a stream that delivered content must not be retried; calls = %d", f.CallCount())
			}
		})
	}
}

func TestStreamCutBeforeContentIsRetried(t *testing.T) {
	f := startFake(t)
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			f.Reset()
			f.Script(fakellm.Rule{Cut: true, Times: 1})
			var waits []string
			p := fakeProvider(t, f, typ, &waits)
			resp, err := p.Stream(context.Background(), userReq("m", "again"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Attempts != 2 || resp.Content != "echo: again" || f.CallCount() != 2 || len(waits) != 1 {
				t.Fatalf("attempts %d content %q calls %d waits %v", resp.Attempts, resp.Content, f.CallCount(), waits)
			}
		})
	}
}

func TestStreamConsumerErrorStopsWithoutRetry(t *testing.T) {
	f := startFake(t)
	p := fakeProvider(t, f, TypeOpenAI, nil)
	stop := errors.New("client went away")
	_, err := p.Stream(context.Background(), userReq("m", "abc"), func(string) error { return stop })
	if !errors.Is(err, stop) || IsRetryable(err) || f.CallCount() != 1 {
		t.Fatalf("err %v calls %d", err, f.CallCount())
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Reply: "a b c d", ChunkDelay: fakellm.Duration(10 * time.Second)})
	cfg := fakeConfig(f, TypeOllama)
	cfg.Timeout = 300 * time.Millisecond
	cfg.MaxRetries = -1
	p, err := NewProvider("ollama", cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Stream(context.Background(), userReq("m", "x"), nil)
	if !errors.Is(err, ErrStreamIncomplete) || resp == nil || resp.Content == "" {
		t.Fatalf("idle stream: %+v %v", resp, err)
	}
}

func TestCancelledContextIsNotAProviderError(t *testing.T) {
	f := startFake(t)
	p := fakeProvider(t, f, TypeAnthropic, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Chat(ctx, userReq("m", "x"))
	var pe *ProviderError
	if !errors.Is(err, context.Canceled) || errors.As(err, &pe) {
		t.Fatalf("err %T %v", err, err)
	}
}

func TestOpenAIErrorBodyIsQuoted(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Status: 401, Message: "Incorrect API key provided"})
	p := fakeProvider(t, f, TypeOpenAI, nil)
	_, err := p.Chat(context.Background(), userReq("m", "x"))
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 401 || pe.Message != "Incorrect API key provided" || pe.Retryable {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(err.Error(), "test-key") {
		t.Fatal("error text leaks the api key")
	}
	if !strings.Contains(err.Error(), `llm provider "openai" (`+f.OpenAIBaseURL()+`): HTTP 401: Incorrect API key provided`) {
		t.Fatalf("error text %q", err.Error())
	}
}
