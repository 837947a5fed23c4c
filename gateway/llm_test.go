package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/secrets/seed"
)

// The key `agentry onboard` seeded is sealed into the secret store at
// start (its file removed), and the provider named by api_key_secret
// sends it.
func TestSeededProviderKeyReachesTheProvider(t *testing.T) {
	const key = "sk-seeded-gateway-0815"
	var mu sync.Mutex
	var auth []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	defer upstream.Close()

	ws := t.TempDir()
	creds := config.Workspace{Root: ws}.CredentialsDir()
	if err := seed.Write(creds, "llm-openai", key); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	body := "llm:\n  default_provider: openai\n  providers:\n    openai:\n      type: openai\n      base_url: " + upstream.URL + "/v1\n      api_key_secret: llm-openai\n"
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testServicesEnv(t, map[string]string{config.EnvWorkspace: ws, config.EnvConfigPath: cfgPath})

	if _, err := os.Stat(filepath.Join(seed.Dir(creds), "llm-openai")); !os.IsNotExist(err) {
		t.Fatalf("the seed file outlived the start: %v", err)
	}
	if got, err := s.Secrets.Reveal(context.Background(), "llm-openai"); err != nil || got != key {
		t.Fatalf("secret llm-openai = %q, %v", got, err)
	}
	p, ok := s.Router.Provider("openai")
	if !ok {
		t.Fatal("no openai provider")
	}
	if _, err := p.Chat(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || auth[0] != "Bearer "+key {
		t.Fatalf("provider saw Authorization %q", auth)
	}
}
