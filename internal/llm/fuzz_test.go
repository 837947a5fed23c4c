package llm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzProviderStreams: whatever an OpenAI-compatible or Anthropic server
// streams back (SSE lines, cut, garbage), Stream ends with a response or an
// error within its timeout; never a panic or a hang. One loopback server per
// fuzz process serves the current input.
func FuzzProviderStreams(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"), false)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]}}]}\n"), false)
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n"), true)
	f.Add([]byte("data: {\"type\":\"error\",\"error\":{\"message\":\"overloaded\"}}\n"), true)
	f.Add([]byte("data: [DONE"), false)
	f.Add([]byte(": comment\n\ndata:\n\ndata: {}\n"), false)
	var current atomic.Value
	current.Store([]byte{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(current.Load().([]byte))
	}))
	f.Cleanup(srv.Close)
	openai, err := NewProvider("fuzz-openai", ProviderConfig{Type: TypeOpenAI, BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second, MaxRetries: -1})
	if err != nil {
		f.Fatal(err)
	}
	anthropic, err := NewProvider("fuzz-anthropic", ProviderConfig{Type: TypeAnthropic, BaseURL: srv.URL, APIKey: "k", Timeout: 5 * time.Second, MaxRetries: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, stream []byte, isAnthropic bool) {
		current.Store(stream)
		p := openai
		if isAnthropic {
			p = anthropic
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := p.Stream(ctx, Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}, func(string) error { return nil })
		if err == nil && resp == nil {
			t.Fatal("no response and no error")
		}
		if ctx.Err() != nil {
			t.Fatalf("the stream hung: %q", stream)
		}
	})
}
