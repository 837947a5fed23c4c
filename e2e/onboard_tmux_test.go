package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestOnboardInteractiveInTmux: `agentry onboard` in a real terminal
// (tmux) against a fresh HOME, answers typed into its form; then the
// gateway is started on the workspace it wrote and the agent it created
// answers a chat. Skipped when tmux is not installed.
func TestOnboardInteractiveInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed")
	}
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	h := newHome(t)
	session := "agentry-onboard"
	tm := startTmux(t, tmux, h, session, 30)
	waitFor := func(text string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			pane := tm("capture-pane", "-p", "-t", session)
			if strings.Contains(pane, text) {
				return pane
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q on the screen:\n%s", text, pane)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	tm("send-keys", "-t", session, fmt.Sprintf(`%s onboard --provider ollama --base-url %s --port %d; echo "EXIT""=$?"`, h.bin, fake.URL(), port), "Enter")
	waitFor("Name of your first agent")
	tm("send-keys", "-t", session, "C-u")
	tm("send-keys", "-t", session, "-l", "tmuxbot")
	tm("send-keys", "-t", session, "Enter")
	waitFor("Default model")
	tm("send-keys", "-t", session, "Enter") // the suggested model
	pane := waitFor("EXIT=")
	if !strings.Contains(pane, "EXIT=0") || !strings.Contains(pane, "agentry chat --agent tmuxbot") {
		t.Fatalf("onboard in tmux:\n%s", pane)
	}
	raw, err := os.ReadFile(filepath.Join(h.WS, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.WS, "agents", "tmuxbot.yaml")); err != nil {
		t.Fatalf("first agent: %v", err)
	}
	// The gateway on the onboarded workspace and configuration (the test
	// harness adds its Temporal and API key) answers the new agent.
	g := gatewaytest.Start(t, gatewaytest.Options{Workspace: h.WS, Fake: fake, Config: string(raw)})
	fake.Script(fakellm.Rule{Contains: "Hello", Reply: "Hi, I am tmuxbot."})
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "tmuxbot", "text": "Hello!"})
	if r.Status != 200 || r.JSON["reply"] != "Hi, I am tmuxbot." {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
}

// TestOnboardKeyBecomesAGatewaySecret: a cloud provider's key piped to
// `agentry onboard --api-key-stdin` is never in config.yaml; the gateway
// started on that workspace seals it into its secret store, removes the
// seed file, and sends it to the provider.
func TestOnboardKeyBecomesAGatewaySecret(t *testing.T) {
	const key = "sk-onboarded-key-9z7q"
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	h := newHome(t)
	r := h.runWith(nil, key+"\n", "onboard", "--non-interactive", "--provider", "openai", "--base-url", fake.URL()+"/v1",
		"--model", "gpt-4o-mini", "--port", fmt.Sprint(port), "--agent", "keybot", "--api-key-stdin")
	if r.Code != 0 || strings.Contains(r.Stdout+r.Stderr, key) {
		t.Fatalf("onboard: %s", r)
	}
	raw, err := os.ReadFile(filepath.Join(h.WS, "config.yaml"))
	if err != nil || strings.Contains(string(raw), key) || !strings.Contains(string(raw), "api_key_secret: llm-openai") {
		t.Fatalf("config.yaml (%v):\n%s", err, raw)
	}
	seedFile := filepath.Join(h.WS, "credentials", "seed", "llm-openai")
	if _, err := os.Stat(seedFile); err != nil {
		t.Fatalf("seed: %v", err)
	}
	// The harness's own providers are merged under the onboarded file, so
	// the onboarded openai entry (api_key_secret) is the one used.
	g := gatewaytest.Start(t, gatewaytest.Options{Workspace: h.WS, Fake: fake, Config: string(raw)})
	if _, err := os.Stat(seedFile); !os.IsNotExist(err) {
		t.Fatalf("the seed file outlived the gateway's start: %v", err)
	}
	fake.Script(fakellm.Rule{Contains: "Hello", Reply: "Hi, I am keybot."})
	c := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "keybot", "text": "Hello!"})
	if c.Status != 200 || c.JSON["reply"] != "Hi, I am keybot." {
		t.Fatalf("chat: %d %s", c.Status, c.Raw)
	}
	calls := fake.Calls()
	if len(calls) == 0 || calls[len(calls)-1].Auth != "bearer" || calls[len(calls)-1].KeyHint != key[len(key)-4:] {
		t.Fatalf("the provider did not get the onboarded key: %+v", calls)
	}
	for _, db := range []string{"data"} {
		entries, _ := os.ReadDir(filepath.Join(h.WS, db))
		for _, e := range entries {
			if b, _ := os.ReadFile(filepath.Join(h.WS, db, e.Name())); strings.Contains(string(b), key) {
				t.Fatalf("%s/%s holds the key in clear", db, e.Name())
			}
		}
	}
}
