package fakellm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func start(t testing.TB) *Server {
	t.Helper()
	s := New()
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func post(t testing.TB, url string, body any, headers ...string) (*http.Response, []byte) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, out
}

func openAIBody(model, text string, stream bool) map[string]any {
	b := map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": text}}}
	if stream {
		b["stream"] = true
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

func TestDefaultEchoOpenAI(t *testing.T) {
	s := start(t)
	resp, body := post(t, s.OpenAIBaseURL()+"/chat/completions", openAIBody("gpt-4o-mini", "hello fake", false), "Authorization", "Bearer sk-abcdef")
	if resp.StatusCode != 200 || resp.Header.Get("x-request-id") != "req_fake_1" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Choices[0].Message.Content != "echo: hello fake" || out.Usage.PromptTokens != len("hello fake")/4 || out.Usage.CompletionTokens != len("echo: hello fake")/4 {
		t.Fatalf("answer %s", body)
	}
	calls := s.Calls()
	if len(calls) != 1 || s.CallCount() != 1 {
		t.Fatalf("calls %d", len(calls))
	}
	c := calls[0]
	if c.Format != "openai" || c.Model != "gpt-4o-mini" || c.Stream || c.LastUserMessage != "hello fake" || c.Status != 200 ||
		c.Auth != "bearer" || c.KeyHint != "cdef" || !strings.HasPrefix(c.MessagesDigest, "sha256:") || c.Rule != -1 {
		t.Fatalf("record %+v", c)
	}
}

func TestStreamIsChunkedAndEndsWithUsageAndDone(t *testing.T) {
	s := start(t)
	resp, body := post(t, s.OpenAIBaseURL()+"/chat/completions", openAIBody("m", "a longer message to stream", true))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	if lines[len(lines)-1] != "data: [DONE]" || !strings.Contains(lines[len(lines)-2], `"prompt_tokens"`) {
		t.Fatalf("stream tail: %q", lines[len(lines)-2:])
	}
	var text strings.Builder
	content := 0
	for _, l := range lines[:len(lines)-1] {
		var ch struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &ch); err != nil {
			t.Fatalf("chunk %q: %v", l, err)
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			content++
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if content != 4 || text.String() != "echo: a longer message to stream" {
		t.Fatalf("%d chunks, text %q", content, text.String())
	}
}

func TestScriptOverHTTPAndCallsAndReset(t *testing.T) {
	s := start(t)
	script := `{"rules":[
		{"contains":"weather","times":1,"status":429,"retry_after":"1","message":"slow down"},
		{"model":"claude-x","reply":"scripted","usage":{"input_tokens":10,"output_tokens":3}}
	]}`
	resp, err := http.Post(s.URL()+"/_fake/script", "application/json", strings.NewReader(script))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("script: %v %v", resp, err)
	}
	resp.Body.Close()

	anth := func(text string) (*http.Response, []byte) {
		return post(t, s.URL()+"/v1/messages", map[string]any{
			"model": "claude-x", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": text}},
		}, "anthropic-version", "2023-06-01", "x-api-key", "key-9999")
	}
	r1, b1 := anth("what is the weather")
	if r1.StatusCode != 429 || r1.Header.Get("Retry-After") != "1" || !strings.Contains(string(b1), `"rate_limit_error"`) || !strings.Contains(string(b1), "slow down") {
		t.Fatalf("429: %d %s", r1.StatusCode, b1)
	}
	r2, b2 := anth("what is the weather")
	if r2.StatusCode != 200 || !strings.Contains(string(b2), `"scripted"`) || !strings.Contains(string(b2), `"input_tokens":10`) || r2.Header.Get("request-id") == "" {
		t.Fatalf("after times=1: %d %s", r2.StatusCode, b2)
	}

	cresp, err := http.Get(s.URL() + "/_fake/calls?since=1")
	if err != nil {
		t.Fatal(err)
	}
	var calls CallsResponse
	_ = json.NewDecoder(cresp.Body).Decode(&calls)
	cresp.Body.Close()
	if calls.Count != 2 || len(calls.Calls) != 1 || calls.Calls[0].Seq != 2 || calls.Calls[0].Rule != 1 || calls.Calls[0].Auth != "x-api-key" {
		t.Fatalf("calls %+v", calls)
	}

	resp, _ = http.Post(s.URL()+"/_fake/reset", "application/json", nil)
	resp.Body.Close()
	if s.CallCount() != 0 || len(s.Calls()) != 0 {
		t.Fatal("reset kept calls")
	}
	_, b3 := anth("what is the weather")
	if !strings.Contains(string(b3), "echo: what is the weather") {
		t.Fatalf("reset kept rules: %s", b3)
	}

	bad, _ := http.Post(s.URL()+"/_fake/script", "application/json", strings.NewReader(`{"rules":[{"reply":"x","tims":1}]}`))
	if bad.StatusCode != 400 {
		t.Fatalf("misspelt field accepted: %d", bad.StatusCode)
	}
	bad.Body.Close()
}

func TestTimesIsExactUnderConcurrency(t *testing.T) {
	s := start(t)
	s.Script(Rule{Reply: "first", Times: 7})
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, body := post(t, s.URL()+"/api/chat", map[string]any{"model": "llama3.2", "stream": false,
				"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
			if strings.Contains(string(body), `"first"`) {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firsts != 7 || s.CallCount() != 30 {
		t.Fatalf("rule answered %d times (want 7), calls %d", firsts, s.CallCount())
	}
}

func TestDigestIsTheSameInEveryFormat(t *testing.T) {
	s := start(t)
	post(t, s.OpenAIBaseURL()+"/chat/completions", map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "system", "content": "sys"},
		map[string]any{"role": "user", "content": "write"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "write_file", "arguments": `{"path": "a.md"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": "ok"},
	}})
	post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "max_tokens": 10, "system": "sys", "messages": []any{
		map[string]any{"role": "user", "content": "write"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "c1", "name": "write_file", "input": map[string]any{"path": "a.md"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}}},
	}}, "anthropic-version", "2023-06-01")
	calls := s.Calls()
	if calls[0].MessagesDigest != calls[1].MessagesDigest || calls[0].MessageCount != 4 {
		t.Fatalf("digests differ: %+v", calls)
	}
	if calls[0].LastUserMessage != "write" {
		t.Fatalf("last user %q", calls[0].LastUserMessage)
	}
}

func TestCutStreamBreaksTheConnection(t *testing.T) {
	s := start(t)
	s.Script(Rule{Reply: "aaaa bbbb cccc dddd", CutAfterChunks: 2})
	raw, _ := json.Marshal(map[string]any{"model": "llama3.2", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	resp, err := http.Post(s.URL()+"/api/chat", "application/json", bytes.NewReader(raw)) // Ollama streams by default
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if !errors.Is(sc.Err(), io.ErrUnexpectedEOF) || len(lines) != 2 || strings.Contains(strings.Join(lines, ""), `"done":true`) {
		t.Fatalf("err %v lines %q", sc.Err(), lines)
	}
	if c := s.Calls()[0]; !c.Cut || !c.Stream {
		t.Fatalf("record %+v", c)
	}
}

func TestValidationMirrorsTheProviders(t *testing.T) {
	s := start(t)
	r, b := post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	if r.StatusCode != 400 || !strings.Contains(string(b), "anthropic-version") {
		t.Fatalf("missing version: %d %s", r.StatusCode, b)
	}
	r, b = post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "x"}}}, "anthropic-version", "2023-06-01")
	if r.StatusCode != 400 || !strings.Contains(string(b), "max_tokens") {
		t.Fatalf("missing max_tokens: %d %s", r.StatusCode, b)
	}
	r, b = post(t, s.OpenAIBaseURL()+"/chat/completions", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "tool", "content": "x"}}})
	if r.StatusCode != 400 || !strings.Contains(string(b), "tool_call_id") {
		t.Fatalf("tool without id: %d %s", r.StatusCode, b)
	}
	r, b = post(t, s.URL()+"/api/chat", map[string]any{"messages": []any{}})
	if r.StatusCode != 400 || string(bytes.TrimSpace(b)) != `{"error":"model is required"}` {
		t.Fatalf("ollama without model: %d %s", r.StatusCode, b)
	}
}

func TestModelNameBehaviours(t *testing.T) {
	r := ruleFromModel("fake-slow-200ms-cut-2")
	if time.Duration(r.Delay) != 200*time.Millisecond || !r.Cut || r.CutAfterChunks != 2 || r.Status != 0 {
		t.Fatalf("%+v", r)
	}
	if r := ruleFromModel("fail-503"); r.Status != 503 {
		t.Fatalf("%+v", r)
	}
	if r := ruleFromModel("llama3.2"); r.Delay != 0 || r.Status != 0 || r.Cut {
		t.Fatalf("plain model has behaviour: %+v", r)
	}
	s := start(t)
	resp, _ := post(t, s.OpenAIBaseURL()+"/chat/completions", openAIBody("fail-502", "x", false))
	if resp.StatusCode != 502 {
		t.Fatalf("fail-502 gave %d", resp.StatusCode)
	}
	// A slow model's delay ends when the client gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	raw, _ := json.Marshal(openAIBody("slow-1m", "x", false))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.OpenAIBaseURL()+"/chat/completions", bytes.NewReader(raw))
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow model: %v", err)
	}
}

func TestDurationJSON(t *testing.T) {
	var r Rule
	if err := json.Unmarshal([]byte(`{"delay":"250ms","chunk_delay":40}`), &r); err != nil {
		t.Fatal(err)
	}
	if time.Duration(r.Delay) != 250*time.Millisecond || time.Duration(r.ChunkDelay) != 40*time.Millisecond {
		t.Fatalf("%+v", r)
	}
	if err := json.Unmarshal([]byte(`{"delay":"soon"}`), &r); err == nil {
		t.Fatal("bad duration accepted")
	}
}

func TestSplitChunksKeepsRunes(t *testing.T) {
	parts := splitChunks("héllo wörld ✓", 4)
	if len(parts) != 4 || strings.Join(parts, "") != "héllo wörld ✓" {
		t.Fatalf("%q", parts)
	}
	if got := splitChunks("ab", 4); len(got) != 2 {
		t.Fatalf("%q", got)
	}
	if splitChunks("", 4) != nil {
		t.Fatal("empty text has chunks")
	}
}

func TestTagsAndRoot(t *testing.T) {
	s := start(t)
	resp, err := http.Get(s.URL() + "/api/tags")
	if err != nil {
		t.Fatal(err)
	}
	var tags struct {
		Models []struct{ Name string } `json:"models"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&tags)
	resp.Body.Close()
	if len(tags.Models) == 0 || tags.Models[0].Name != "llama3.2:latest" {
		t.Fatalf("tags %+v", tags)
	}
	resp, _ = http.Get(s.URL() + "/")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "Ollama is running" {
		t.Fatalf("root %q", b)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, addr, slog.New(slog.DiscardHandler)) }()
	var resp *http.Response
	for range 200 {
		if resp, err = http.Get("http://" + addr + "/api/version"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), "256.0.0.1:1", nil); err == nil {
		t.Fatal("bad address accepted")
	}
}

func BenchmarkFakeOpenAIChat(b *testing.B) {
	s := start(b)
	raw, _ := json.Marshal(openAIBody("gpt-4o-mini", "benchmark message", false))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	url := s.OpenAIBaseURL() + "/chat/completions"
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(raw))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

func TestEchoAuthRepeatsTheCredentials(t *testing.T) {
	s := start(t)
	s.Script(Rule{Contains: "leak", Status: 401, Message: "bad key", EchoAuth: true})
	r, b := post(t, s.OpenAIBaseURL()+"/chat/completions", openAIBody("m", "leak please", false), "Authorization", "Bearer sk-echoed-1234")
	if r.StatusCode != 401 || !strings.Contains(string(b), "bad key") || !strings.Contains(string(b), "Bearer sk-echoed-1234") {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	r, b = post(t, s.URL()+"/v1/messages", map[string]any{"model": "m", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "leak"}}},
		"anthropic-version", "2023-06-01", "x-api-key", "anthropic-echoed-5678")
	if r.StatusCode != 401 || !strings.Contains(string(b), "anthropic-echoed-5678") {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}
