package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
)

// decodeJSON decodes with goccy/go-json and falls back to encoding/json on
// a refusal: for every body, what it leaves in the value and whether it
// fails (and as what) must be what encoding/json alone gave.
func TestDecodeJSONAgreesWithEncodingJSON(t *testing.T) {
	bodies := []string{
		`{"id":"c1","model":"m","choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		`{"id":"c1","choices":[{"message":{"content":null,"refusal":"no","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
		`{"ID":"upper-case keys match","MODEL":"m"}`,
		`{"id":"unicode \u00e9 \ud83d\ude00","usage":{"prompt_tokens_details":{"cached_tokens":7}}}`,
		`{"error":{"message":"overloaded","type":"server_error","code":529}}`,
		`{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":2},"stop_reason":"end_turn"}`,
		`{"message":{"role":"assistant","content":"hi"},"done":true,"prompt_eval_count":4,"eval_count":5}`,
		`{"id":"c1","choices":[{"message":{"content":"cut`,
		`{"id":"c1",`,
		``,
		`not json`,
		`{"usage":{"prompt_tokens":"three"}}`,
		`{"choices":{"not":"a list"}}`,
		`{"id":"c1"} trailing`,
		`[1,2]`,
		`null`,
	}
	h := &httpBase{id: "p", typ: "openai", base: "http://provider"}
	for _, body := range bodies {
		for _, target := range []func() any{func() any { return &oaResponse{} }, func() any { return &anResponse{} }, func() any { return &olResponse{} }} {
			got, want := target(), target()
			err := h.decodeJSON(context.Background(), &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader([]byte(body)))}, got)
			wantErr := json.NewDecoder(bytes.NewReader([]byte(body))).Decode(want)
			if (err == nil) != (wantErr == nil) {
				t.Errorf("%T from %q: error %v, encoding/json's %v", got, body, err, wantErr)
				continue
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("%T from %q:\n got %+v\nwant %+v", got, body, got, want)
			}
			var pe *ProviderError
			if wantErr != nil && (!errors.As(err, &pe) || pe.Err == nil || pe.Err.Error() != wantErr.Error() && !errors.Is(pe.Err, wantErr)) {
				t.Errorf("%T from %q: error %v, want encoding/json's %v", got, body, err, wantErr)
			}
		}
	}
}

// BenchmarkDecodeChatCompletion: a chat completion as the fake upstream
// sends it, decoded the way the client did before (encoding/json's
// streaming decoder) and the way it does now (decodeJSON).
func BenchmarkDecodeChatCompletion(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-fake123","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! I am a fake upstream."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}`)
	b.Run("encoding-json-decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r oaResponse
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeJSON", func(b *testing.B) {
		h := &httpBase{id: "p", typ: "openai", base: "http://provider"}
		b.ReportAllocs()
		for b.Loop() {
			var r oaResponse
			if err := h.decodeJSON(context.Background(), &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body))}, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// endless is a body that never ends: spaces, which JSON allows before a
// value, so only a bound stops the read.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestDecodeJSONBoundsTheBody: a non-streaming answer is read whole, so an
// endpoint sending without end is cut off at maxResponseBody with a
// provider error, having read little more than that.
func TestDecodeJSONBoundsTheBody(t *testing.T) {
	h := &httpBase{id: "p", typ: "openai", base: "http://provider"}
	body := &endless{}
	err := h.decodeJSON(context.Background(), &http.Response{StatusCode: 200, Body: io.NopCloser(body)}, &oaResponse{})
	var pe *ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "larger than 32 MiB") {
		t.Fatalf("decodeJSON of an endless body: %v; want a provider error naming the limit", err)
	}
	if body.read > maxResponseBody+64<<10 {
		t.Fatalf("read %d bytes of an endless body; the bound is %d", body.read, maxResponseBody)
	}
	// A body at the bound is still read.
	ok := `{"id":"c1"}` + strings.Repeat(" ", maxResponseBody-len(`{"id":"c1"}`))
	var got oaResponse
	if err := h.decodeJSON(context.Background(), &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(ok))}, &got); err != nil || got.ID != "c1" {
		t.Fatalf("decodeJSON of a body of exactly maxResponseBody: %+v, %v", got, err)
	}
}

// post encodes request bodies with goccy/go-json: for each provider's
// request, the bytes must be the ones encoding/json writes.
func TestEncodeRequestAgreesWithEncodingJSON(t *testing.T) {
	temp := 0.25
	req := Request{Model: "m", Temperature: &temp, MaxTokens: 100, PromptCaching: true, ToolChoice: "lookup",
		Messages: []Message{
			{Role: RoleSystem, Content: "You are <terse> & quick \u2028 é 😀"},
			{Role: RoleUser, Content: "what's \"up\"?\n\ttabbed"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "t1", Name: "lookup", Arguments: json.RawMessage(`{ "q" : [1, 2.50, "x"] }`)}}},
			{Role: RoleTool, ToolCallID: "t1", Name: "lookup", Content: `{"answer":42}`},
		},
		Tools: []Tool{{Name: "lookup", Description: "finds things", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}}}
	for _, body := range []any{
		(&openAIClient{httpBase: &httpBase{}}).buildRequest(req, false),
		(&openAIClient{httpBase: &httpBase{}}).buildRequest(Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}}, true),
		(&anthropicClient{httpBase: &httpBase{}}).buildRequest(req, false),
		(&ollamaClient{httpBase: &httpBase{}}).buildRequest(req, false),
	} {
		want, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gojson.Marshal(body)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T:\n goccy %s (%v)\n encoding/json %s", body, got, err, want)
		}
	}
}
