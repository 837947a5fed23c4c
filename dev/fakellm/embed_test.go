package fakellm

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"testing"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func TestEmbedTextIsDeterministicAndLexical(t *testing.T) {
	a := EmbedText("The invoice is due on the 5th of March", 0)
	if len(a) != DefaultEmbeddingDimensions {
		t.Fatalf("dimensions %d", len(a))
	}
	again := EmbedText("the invoice is due on the 5th of march!", 0)
	for i := range a {
		if a[i] != again[i] {
			t.Fatal("the same words (case and punctuation aside) gave another vector")
		}
	}
	if n := cosine(a, a); math.Abs(n-1) > 1e-6 {
		t.Fatalf("not normalised: %v", n)
	}
	near := EmbedText("when is the invoice due", 0)
	far := EmbedText("penguins swim in cold water", 0)
	if cn, cf := cosine(a, near), cosine(a, far); cn <= cf+0.2 {
		t.Fatalf("similar texts %.3f, unrelated %.3f: want similar clearly closer", cn, cf)
	}
	for _, v := range EmbedText("  ...  ", 8) {
		if v != 0 {
			t.Fatal("a text without words is not the zero vector")
		}
	}
	if len(EmbedText("x", 64)) != 64 {
		t.Fatal("dimension not honoured")
	}
}

func postJSON(t *testing.T, url string, body any) (*http.Response, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

func TestEmbeddingsOnBothWireFormats(t *testing.T) {
	s := New()
	if err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	resp, out := postJSON(t, s.OpenAIBaseURL()+"/embeddings", map[string]any{"model": "text-embedding-3-small", "input": []string{"alpha beta", "gamma"}, "dimensions": 32})
	if resp.StatusCode != 200 {
		t.Fatalf("openai: %d %v", resp.StatusCode, out)
	}
	data := out["data"].([]any)
	if len(data) != 2 || len(data[1].(map[string]any)["embedding"].([]any)) != 32 || data[1].(map[string]any)["index"].(float64) != 1 {
		t.Fatalf("openai data: %v", out)
	}
	if u := out["usage"].(map[string]any); u["prompt_tokens"].(float64) != 3 { // 10/4=2, max(1,5/4)=1
		t.Fatalf("openai usage: %v", u)
	}
	if resp.Header.Get("x-request-id") == "" {
		t.Fatal("no request id")
	}

	resp, out = postJSON(t, s.URL()+"/api/embed", map[string]any{"model": "nomic-embed-text", "input": "single text"})
	if resp.StatusCode != 200 || len(out["embeddings"].([]any)) != 1 || out["prompt_eval_count"].(float64) != 2 {
		t.Fatalf("ollama: %d %v", resp.StatusCode, out)
	}
	if n := len(out["embeddings"].([]any)[0].([]any)); n != DefaultEmbeddingDimensions {
		t.Fatalf("ollama dimensions %d", n)
	}

	// Failures on cue, like chat: a 429 with Retry-After, then usage left out.
	s.Script(Rule{Contains: "busy", Times: 1, Status: 429, RetryAfter: "2"}, Rule{Format: "ollama", OmitUsage: true})
	resp, out = postJSON(t, s.OpenAIBaseURL()+"/embeddings", map[string]any{"model": "m", "input": []string{"busy now"}})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || out["error"] == nil {
		t.Fatalf("scripted 429: %d %v", resp.StatusCode, out)
	}
	resp, _ = postJSON(t, s.OpenAIBaseURL()+"/embeddings", map[string]any{"model": "m", "input": []string{"busy now"}})
	if resp.StatusCode != 200 {
		t.Fatalf("after the 429 rule ran out: %d", resp.StatusCode)
	}
	_, out = postJSON(t, s.URL()+"/api/embed", map[string]any{"model": "m", "input": []string{"x"}})
	if _, ok := out["prompt_eval_count"]; ok {
		t.Fatalf("omit_usage ignored: %v", out)
	}
	s.Script()
	resp, _ = postJSON(t, s.URL()+"/api/embed", map[string]any{"model": "fail-503", "input": []string{"x"}})
	if resp.StatusCode != 503 {
		t.Fatalf("model-name failure: %d", resp.StatusCode)
	}
	for _, bad := range []map[string]any{{"model": "m"}, {"input": []string{"x"}}, {"model": "m", "input": []string{}}, {"model": "m", "input": []string{""}}, {"model": "m", "input": 7}} {
		if resp, out := postJSON(t, s.OpenAIBaseURL()+"/embeddings", bad); resp.StatusCode != 400 || out["error"] == nil {
			t.Fatalf("bad request %v: %d %v", bad, resp.StatusCode, out)
		}
	}
	calls := s.Calls()
	if calls[0].Path != "/v1/embeddings" || calls[0].Inputs != 2 || calls[0].LastUserMessage != "alpha beta" || calls[1].Format != "ollama" {
		t.Fatalf("records: %+v %+v", calls[0], calls[1])
	}
}
