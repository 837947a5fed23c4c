package telegram

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/internal/channels"
)

const secret = "s3cret_Token-for-tests"

// ingressServer serves the adapter's Ingress on loopback, as the
// gateway's POST /ingress/<channel id> does.
func ingressServer(t *testing.T, a func() *Adapter) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		resp := a().Ingress(r.Context(), channels.IngressRequest{Header: r.Header, Body: body, Received: time.Now()})
		w.Header().Set("Content-Type", resp.ContentType)
		w.WriteHeader(resp.Status)
		w.Write(resp.Body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func webhookEnv(t *testing.T) (*env, *httptest.Server) {
	var e *env
	ts := ingressServer(t, func() *Adapter { return e.a })
	e = newEnv(t, func(s *channels.Settings) {
		s.Mode, s.PublicURL, s.SecretToken = ModeWebhook, ts.URL+"/ingress/tg", secret
	})
	return e, ts
}

func post(t *testing.T, url, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(SecretHeader, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWebhookModeSetsSecretAndAcceptsAfterTheSink(t *testing.T) {
	e, ts := webhookEnv(t)
	// The sink refuses the first delivery: the 500 makes the fake (like
	// Telegram) deliver it again.
	e.rec.fail = func(_ channels.Inbound, attempt int) error {
		if attempt == 0 {
			return errRefusedBySink
		}
		return nil
	}
	e.receive()
	waitFor(t, "the webhook set", func() bool { return e.fake.Webhook().URL != "" })
	h := e.fake.Webhook()
	if h.URL != ts.URL+"/ingress/tg" || h.SecretToken != secret || strings.Join(h.AllowedUpdates, ",") != "message,edited_message,channel_post" {
		t.Fatalf("setWebhook carried %+v", h)
	}
	waitFor(t, "connected", func() bool { return e.deps.Status.View().State == channels.StateConnected })
	id := e.fake.AddMessage(9, "private", 7, "via webhook", faketelegram.Username("zoe"))
	waitFor(t, "the update delivered", func() bool { return e.fake.Pending() == 0 })
	got := e.rec.got()
	if len(got) != 1 || got[0].Text != "via webhook" || got[0].MessageID != idOf(id) || got[0].Username != "zoe" {
		t.Fatalf("sink got %+v", got)
	}
	if calls := e.rec.callIDs(); len(calls) != 2 {
		t.Fatalf("sink calls %v, want the refused one and its redelivery", calls)
	}
	if h := e.fake.Webhook(); h.Failed != 1 || h.Delivered != 1 || !strings.Contains(h.LastError, "500") {
		t.Fatalf("webhook deliveries %+v, want 1 failed (500) then 1 delivered", h)
	}
	if e.fake.Calls("getUpdates") != 0 {
		t.Fatal("webhook mode polled getUpdates")
	}
}

func TestWebhookRefusesMissingOrWrongSecretToken(t *testing.T) {
	e, ts := webhookEnv(t)
	url := ts.URL + "/ingress/tg"
	update := `{"update_id":77,"message":{"message_id":1,"date":1700000000,"chat":{"id":5,"type":"private"},"from":{"id":5,"is_bot":false,"first_name":"A"},"text":"forged"}}`
	for name, tok := range map[string]string{"missing": "", "wrong": "s3cret_Token-for-testX", "prefix": "s3cret"} {
		if code := post(t, url, tok, update); code != http.StatusUnauthorized {
			t.Errorf("%s secret token: %d, want 401", name, code)
		}
	}
	if n := len(e.rec.callIDs()); n != 0 {
		t.Fatalf("the sink was called %d times for unverified callbacks", n)
	}
	if code := post(t, url, secret, `{"update_id":`); code != http.StatusBadRequest {
		t.Fatalf("bad JSON: %d, want 400", code)
	}
	// The good token: the adapter learns the bot (getMe) on first use.
	if code := post(t, url, secret, update); code != http.StatusOK {
		t.Fatalf("good secret token: %d, want 200", code)
	}
	if got := e.rec.got(); len(got) != 1 || got[0].Text != "forged" || updateOf(got[0].MessageID) != 77 {
		t.Fatalf("sink got %+v", got)
	}
	e.rec.fail = func(channels.Inbound, int) error { return errRefusedBySink }
	if code := post(t, url, secret, strings.Replace(update, "77", "78", 1)); code != http.StatusInternalServerError {
		t.Fatalf("sink refused: %d, want 500 so Telegram redelivers", code)
	}
	// An ignored update is acknowledged (nothing to redeliver).
	edited := `{"update_id":79,"edited_message":{"message_id":1,"date":1700000000,"edit_date":1700000001,"chat":{"id":5,"type":"private"},"text":"x"}}`
	if code := post(t, url, secret, edited); code != http.StatusOK {
		t.Fatalf("edited message: %d, want 200", code)
	}
	if v := e.deps.Status.View(); v.Ignored != 1 {
		t.Fatalf("ignored %d, want 1", v.Ignored)
	}
}

func TestPollingModeRefusesEveryCallback(t *testing.T) {
	e := newEnv(t, nil) // no secret token: no callback can be verified
	resp := e.a.Ingress(context.Background(), channels.IngressRequest{Header: http.Header{}, Body: []byte(`{"update_id":1}`)})
	if resp.Status != http.StatusUnauthorized || len(e.rec.callIDs()) != 0 {
		t.Fatalf("status %d, sink calls %v", resp.Status, e.rec.callIDs())
	}
}

func TestNewRefusesIncompleteSettings(t *testing.T) {
	base := channels.Settings{ID: "tg", BotToken: faketelegram.DefaultToken}
	cases := map[string]func(*channels.Settings){
		"no token":              func(s *channels.Settings) { s.BotToken = "" },
		"malformed token":       func(s *channels.Settings) { s.BotToken = "not-a-token" },
		"webhook no secret":     func(s *channels.Settings) { s.Mode, s.PublicURL = ModeWebhook, "https://x.example/ingress/tg" },
		"webhook no public url": func(s *channels.Settings) { s.Mode, s.SecretToken = ModeWebhook, secret },
		"unknown mode":          func(s *channels.Settings) { s.Mode = "carrier-pigeon" },
	}
	for name, edit := range cases {
		s := base
		edit(&s)
		_, err := New(channels.Deps{Settings: s, Status: &channels.Status{}})
		if err == nil {
			t.Errorf("%s: New accepted it", name)
			continue
		}
		if strings.Contains(err.Error(), "AAFake") {
			t.Errorf("%s: the error quotes the token: %v", name, err)
		}
	}
	for _, mode := range []string{"", ModePolling} {
		s := base
		s.Mode = mode
		if _, err := New(channels.Deps{Settings: s}); err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
}
