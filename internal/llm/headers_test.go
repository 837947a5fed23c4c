package llm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Every provider request carries the JSON headers, the configured extra
// headers (which win) and the credentials; one request's headers are its
// own (they start from a copy of the provider's set).
func TestProviderRequestHeaders(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","model":"m","choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	}))
	defer srv.Close()
	for _, typ := range []string{TypeOpenAI, TypeOllama} {
		seen = nil
		p, err := NewProvider("p", ProviderConfig{Type: typ, BaseURL: srv.URL, APIKey: "sk-test", MaxRetries: -1,
			Headers: map[string]string{"OpenAI-Organization": "org-1", "user-agent": "custom-agent"}})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := p.Chat(context.Background(), Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
		}
		if len(seen) != 2 {
			t.Fatalf("%s: %d requests seen", typ, len(seen))
		}
		for i, h := range seen {
			if h.Get("Content-Type") != "application/json" || h.Get("Accept") == "" || h.Get("OpenAI-Organization") != "org-1" ||
				h.Get("User-Agent") != "custom-agent" || h.Get("Authorization") != "Bearer sk-test" || len(h.Values("Authorization")) != 1 {
				t.Errorf("%s request %d headers: %v", typ, i, h)
			}
		}
	}
}
