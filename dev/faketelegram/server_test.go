package faketelegram

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mymmrac/telego"
	ta "github.com/mymmrac/telego/telegoapi"
)

// client is the real library pointed at the fake.
func client(t *testing.T, s *Server, token string) *telego.Bot {
	t.Helper()
	b, err := telego.NewBot(token, telego.WithAPIServer(s.URL()), telego.WithAPICaller(ta.HTTPCaller{Client: &http.Client{Timeout: 30 * time.Second}}), telego.WithDiscardLogger())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func start(t *testing.T, tokens ...string) *Server {
	t.Helper()
	s, err := Start(tokens...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func apiErr(t *testing.T, err error) *ta.Error {
	t.Helper()
	var e *ta.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a Telegram error answer", err)
	}
	return e
}

func TestGetMeAndUnknownToken(t *testing.T) {
	s := start(t)
	me, err := client(t, s, DefaultToken).GetMe(context.Background())
	if err != nil || me.ID != 123456789 || me.Username != s.Username() || !me.IsBot {
		t.Fatalf("getMe %+v %v", me, err)
	}
	_, err = client(t, s, "42:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").GetMe(context.Background())
	if e := apiErr(t, err); e.ErrorCode != 401 || e.Description != "Unauthorized" {
		t.Fatalf("unknown token: %+v", e)
	}
}

func TestGetUpdatesOffsetConfirmsAndDrops(t *testing.T) {
	s := start(t)
	bot := client(t, s, DefaultToken)
	ctx := context.Background()
	a := s.AddMessage(1, "private", 7, "a")
	b := s.AddMessage(1, "private", 7, "b")
	s.AddMessage(2, "group", 8, "c")
	ups, err := bot.GetUpdates(ctx, &telego.GetUpdatesParams{})
	if err != nil || len(ups) != 3 || int64(ups[0].UpdateID) != a || ups[0].Message.Text != "a" || ups[2].Message.Chat.Type != "group" {
		t.Fatalf("first poll %+v %v", ups, err)
	}
	// Without an offset nothing is confirmed: the same updates again.
	if ups, _ := bot.GetUpdates(ctx, &telego.GetUpdatesParams{}); len(ups) != 3 || s.ConfirmedOffset() != 0 {
		t.Fatalf("unconfirmed updates dropped: %d, confirmed %d", len(ups), s.ConfirmedOffset())
	}
	ups, err = bot.GetUpdates(ctx, &telego.GetUpdatesParams{Offset: int(b)})
	if err != nil || len(ups) != 2 || int64(ups[0].UpdateID) != b || s.ConfirmedOffset() != b || s.Pending() != 2 {
		t.Fatalf("offset %d: %d updates, confirmed %d, pending %d, %v", b, len(ups), s.ConfirmedOffset(), s.Pending(), err)
	}
	if ups, _ := bot.GetUpdates(ctx, &telego.GetUpdatesParams{Offset: int(a), Limit: 1}); len(ups) != 1 || int64(ups[0].UpdateID) != b {
		t.Fatalf("an older offset brought back a dropped update: %+v", ups)
	}
}

func TestLongPollWakesOnANewMessage(t *testing.T) {
	s := start(t)
	bot := client(t, s, DefaultToken)
	got := make(chan []telego.Update, 1)
	go func() {
		ups, _ := bot.GetUpdates(context.Background(), &telego.GetUpdatesParams{Timeout: 20})
		got <- ups
	}()
	// The poll waits (no update yet); then one arrives and ends it.
	for s.Calls("getUpdates") == 0 {
		time.Sleep(time.Millisecond)
	}
	id := s.AddMessage(3, "private", 9, "wake up")
	select {
	case ups := <-got:
		if len(ups) != 1 || int64(ups[0].UpdateID) != id {
			t.Fatalf("long poll returned %+v", ups)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not return the new message")
	}
}

func TestRateLimitAnswers(t *testing.T) {
	s := start(t)
	bot := client(t, s, DefaultToken)
	ctx := context.Background()
	s.AddMessage(5, "private", 5, "hi")
	s.FailGetUpdates(1, 2*time.Second)
	_, err := bot.GetUpdates(ctx, &telego.GetUpdatesParams{})
	if e := apiErr(t, err); e.ErrorCode != 429 || e.Parameters == nil || e.Parameters.RetryAfter != 2 {
		t.Fatalf("getUpdates 429: %+v", e)
	}
	s.FailSends(2, 1500*time.Millisecond)
	for i := 0; i < 2; i++ {
		_, err := bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: 5}, Text: "x"})
		if e := apiErr(t, err); e.ErrorCode != 429 || e.Parameters.RetryAfter != 2 {
			t.Fatalf("send %d: %+v", i, e)
		}
	}
	if len(s.Sent()) != 0 {
		t.Fatal("a refused send was recorded")
	}
	if _, err := bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: 5}, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if ups, err := bot.GetUpdates(ctx, &telego.GetUpdatesParams{}); err != nil || len(ups) != 1 {
		t.Fatalf("after the storm: %v %v", ups, err)
	}
}

func TestSendMessageRecordsAndValidates(t *testing.T) {
	s := start(t)
	bot := client(t, s, DefaultToken)
	ctx := context.Background()
	s.AddMessage(-7, "supergroup", 1, "q1", Thread(3)) // message 1
	m, err := bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: -7}, Text: "r1", MessageThreadID: 3,
		ReplyParameters: &telego.ReplyParameters{MessageID: 1}})
	if err != nil || m.MessageID != 2 || m.ReplyToMessage == nil || m.ReplyToMessage.Text != "q1" || m.From.ID != s.ID() {
		t.Fatalf("send %+v %v", m, err)
	}
	want := SentMessage{ChatID: -7, MessageID: 2, Text: "r1", ReplyTo: 1, ThreadID: 3}
	got := s.SentTo(-7)
	if len(got) != 1 || got[0].ChatID != want.ChatID || got[0].MessageID != 2 || got[0].ReplyTo != 1 || got[0].ThreadID != 3 || got[0].Text != "r1" {
		t.Fatalf("recorded %+v", got)
	}
	// A user replies to the bot: reply_to_message is the bot's message.
	s.AddMessage(-7, "supergroup", 1, "thanks", ReplyTo(2))
	ups, _ := bot.GetUpdates(ctx, &telego.GetUpdatesParams{})
	if r := ups[len(ups)-1].Message.ReplyToMessage; r == nil || r.From == nil || r.From.ID != s.ID() {
		t.Fatalf("reply_to_message %+v", r)
	}
	cases := []struct {
		p    telego.SendMessageParams
		code int
	}{
		{telego.SendMessageParams{ChatID: telego.ChatID{ID: 404}, Text: "x"}, 400},
		{telego.SendMessageParams{ChatID: telego.ChatID{ID: -7}, Text: " "}, 400},
		{telego.SendMessageParams{ChatID: telego.ChatID{ID: -7}, Text: string(make([]byte, 4097))}, 400},
		{telego.SendMessageParams{ChatID: telego.ChatID{ID: -7}, Text: "x", ReplyParameters: &telego.ReplyParameters{MessageID: 99}}, 400},
	}
	for i, c := range cases {
		_, err := bot.SendMessage(ctx, &c.p)
		if e := apiErr(t, err); e.ErrorCode != c.code {
			t.Errorf("case %d: %+v", i, e)
		}
	}
	s.Block(-7)
	_, err = bot.SendMessage(ctx, &telego.SendMessageParams{ChatID: telego.ChatID{ID: -7}, Text: "x"})
	if e := apiErr(t, err); e.ErrorCode != 403 {
		t.Fatalf("blocked: %+v", e)
	}
}

func TestWebhookDeliversWithSecretAndRedeliversUntil2xx(t *testing.T) {
	s := start(t)
	bot := client(t, s, DefaultToken)
	ctx := context.Background()
	var mu sync.Mutex
	var headers []string
	var bodies []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		headers = append(headers, r.Header.Get("X-Telegram-Bot-Api-Secret-Token"))
		bodies = append(bodies, string(b))
		if len(bodies) < 3 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer ts.Close()
	if err := bot.SetWebhook(ctx, &telego.SetWebhookParams{URL: ts.URL, SecretToken: "abc_DEF-1"}); err != nil {
		t.Fatal(err)
	}
	_, err := bot.GetUpdates(ctx, &telego.GetUpdatesParams{})
	if e := apiErr(t, err); e.ErrorCode != 409 {
		t.Fatalf("getUpdates with a webhook: %+v", e)
	}
	s.AddMessage(1, "private", 1, "pushed")
	deadline := time.Now().Add(15 * time.Second)
	for s.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 3 || bodies[0] != bodies[2] {
		t.Fatalf("deliveries %v, want the same update 3 times (2 refused)", bodies)
	}
	for _, h := range headers {
		if h != "abc_DEF-1" {
			t.Fatalf("secret header %q", h)
		}
	}
	info, err := bot.GetWebhookInfo(ctx)
	if err != nil || info.URL != ts.URL || info.PendingUpdateCount != 0 {
		t.Fatalf("webhook info %+v %v", info, err)
	}
	if err := bot.SetWebhook(ctx, &telego.SetWebhookParams{URL: ts.URL, SecretToken: "bad token!"}); apiErr(t, err).ErrorCode != 400 {
		t.Fatal("a secret token with forbidden characters was accepted")
	}
	if err := bot.DeleteWebhook(ctx, &telego.DeleteWebhookParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bot.GetUpdates(ctx, &telego.GetUpdatesParams{}); err != nil {
		t.Fatalf("getUpdates after deleteWebhook: %v", err)
	}
}
