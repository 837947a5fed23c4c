package e2e

// The agentry client's channel commands against a real gateway on
// loopback whose Telegram channel talks to dev/faketelegram (issue 44).

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestCLIChannelTelegram: one configure command (token from standard
// input, --enable) starts a Telegram channel; status, list and messages
// show it receiving and answering; webhook mode's status prints the
// ingress URL to register, and that URL takes Telegram's callbacks; no
// output ever shows the token.
func TestCLIChannelTelegram(t *testing.T) {
	tg, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"helper.yaml": "id: helper\ndescription: Answers Telegram\nllm: {provider: ollama}\n"}})
	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	token := faketelegram.DefaultToken
	noToken := func(r result, what string) {
		t.Helper()
		if strings.Contains(r.Stdout+r.Stderr, token) || strings.Contains(r.Stdout+r.Stderr, "AAFakeTelegram") {
			t.Fatalf("%s shows the bot token:\n%s", what, r)
		}
	}
	status := func() map[string]any {
		t.Helper()
		r := h.run("--json", "channel", "telegram", "status")
		expectCode(t, r, 0, "status --json")
		return r.JSON(t)
	}
	waitState := func(want string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			v := status()
			if v["adapter"].(map[string]any)["state"] == want {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("channel telegram never %s: %v", want, v["adapter"])
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	r := h.runWith(nil, token+"\n", "channel", "telegram", "configure", "--agent", "helper", "--api-base-url", tg.URL(), "--bot-token-stdin", "--enable")
	expectCode(t, r, 0, "configure")
	noToken(r, "configure")
	v := waitState("connected")
	if s := v["settings"].(map[string]any); s["bot_token"] != "********" || s["agent"] != "helper" || v["enabled"] != true {
		t.Fatalf("settings after configure: %v", v)
	}

	tg.AddMessage(4242, "private", 77, "hello from the CLI test")
	deadline := time.Now().Add(90 * time.Second)
	for len(tg.SentTo(4242)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the message was never answered; status: %v", status())
		}
		time.Sleep(200 * time.Millisecond)
	}
	var msgs struct {
		Messages []struct {
			ChatID string `json:"chat_id"`
			Status string `json:"status"`
		} `json:"messages"`
	}
	for {
		r = h.run("--json", "channel", "messages", "telegram")
		expectCode(t, r, 0, "messages --json")
		if err := json.Unmarshal([]byte(r.Stdout), &msgs); err != nil {
			t.Fatal(err)
		}
		if len(msgs.Messages) == 1 && msgs.Messages[0].Status == "answered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("messages never shows the answered message:\n%s", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r = h.run("channel", "telegram", "messages", "--limit", "5")
	expectCode(t, r, 0, "messages")
	expectContains(t, r.Stdout, "4242", "messages table")
	expectContains(t, r.Stdout, "answered", "messages table")

	r = h.run("channel", "list")
	expectCode(t, r, 0, "list")
	var row []string
	for _, l := range strings.Split(r.Stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "telegram" {
			row = f
		}
	}
	if len(row) != 8 || row[3] != "connected" || row[6] != "1" || row[7] != "0" {
		t.Fatalf("list row of telegram %q:\n%s", row, r.Stdout)
	}
	expectContains(t, r.Stdout, "whatsapp", "list shows every messaging channel")

	r = h.run("channel", "telegram", "status")
	expectCode(t, r, 0, "status")
	noToken(r, "status")
	flat := strings.Join(strings.Fields(r.Stdout), " ")
	for _, want := range []string{"state: connected since", "agent: helper", "mode: polling", "messages: 1 received, 1 answered, 0 failed", "bot_token ********",
		"polling mode takes no callbacks"} {
		expectContains(t, flat, want, "status")
	}

	// Webhook mode: the secret token from a file; status prints the URL
	// to register, which is where the fake now delivers.
	secret := filepath.Join(h.Dir, "tg-secret")
	os.WriteFile(secret, []byte("cli_test_secret_token\n"), 0o600)
	ingress := g.URL() + "/ingress/telegram"
	r = h.run("channel", "telegram", "configure", "--mode", "webhook", "--public-url", ingress, "--secret-token-file", secret)
	expectCode(t, r, 0, "configure webhook mode")
	waitState("connected")
	r = h.run("channel", "telegram", "status")
	flat = strings.Join(strings.Fields(r.Stdout), " ")
	expectContains(t, flat, "ingress url: "+ingress, "webhook mode status")
	expectContains(t, flat, "secret_token ********", "webhook mode status")
	if strings.Contains(r.Stdout, "cli_test_secret_token") {
		t.Fatalf("status shows the secret token:\n%s", r)
	}
	if hook := tg.Webhook(); hook.URL != ingress || hook.SecretToken != "cli_test_secret_token" {
		t.Fatalf("webhook set at Telegram: %+v", hook)
	}
	resp, err := http.Post(ingress, "application/json", strings.NewReader(`{"update_id":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a callback without the secret token: %d, want 401", resp.StatusCode)
	}
	tg.AddMessage(4242, "private", 77, "second, by webhook")
	for len(tg.SentTo(4242)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook message was never answered; webhook %+v", tg.Webhook())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Pairing is for QR-paired channels only: the gateway's refusal, exit 1.
	r = h.run("channel", "whatsapp", "pair", "--timeout", "5s")
	expectCode(t, r, 1, "pair a disabled whatsapp channel")

	r = h.run("channel", "telegram", "disable")
	expectCode(t, r, 0, "disable")
	if v := status(); v["enabled"] != false {
		t.Fatalf("after disable: %v", v)
	}
}
