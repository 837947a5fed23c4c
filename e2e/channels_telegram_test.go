package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/workflows"
)

// telegramGateway starts an in-process gateway whose telegram channel
// polls the fake Bot API, answered by agent "helper" (the fake LLM echoes).
func telegramGateway(t *testing.T, extra string) (*gatewaytest.Gateway, *faketelegram.Bot) {
	t.Helper()
	tg, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"helper.yaml": "id: helper\nllm: {provider: ollama, model: llama3.2}\n"},
		Config: fmt.Sprintf(`
channels:
  telegram:
    enabled: true
    agent: helper
    bot_token: %q
    api_base_url: %q
%s`, faketelegram.DefaultToken, tg.URL(), extra),
	})
	return g, tg.Bot
}

// waitSent waits until the fake has n messages sent to chat.
func waitSent(t *testing.T, bot *faketelegram.Bot, chat int64, n int, within time.Duration) []faketelegram.SentMessage {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := bot.SentTo(chat)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTelegramDirectMessageIsAnsweredInItsChat(t *testing.T) {
	g, bot := telegramGateway(t, "")
	const alice = 1001
	update := bot.AddMessage(alice, "private", alice, "hello there")
	got := waitSent(t, bot, alice, 1, 60*time.Second)
	if len(got) != 1 || got[0].Text != "echo: hello there" {
		t.Fatalf("sent to the chat: %+v", got)
	}
	// The same message delivered again after its conversation's workflow
	// ended (a platform redelivery much later): its ChannelTurn id is
	// taken, so it is not answered twice.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conv := workflows.ChannelConversationWorkflowID("telegram", fmt.Sprint(alice), "")
	if err := g.Temporal.TerminateWorkflow(ctx, conv, "", "test: the conversation ended"); err != nil {
		t.Fatal(err)
	}
	enq := &channels.TemporalEnqueuer{Client: g.Temporal, TaskQueue: g.Config.Temporal.TaskQueue}
	if err := enq.Enqueue(ctx, "telegram", "helper", channels.Inbound{MessageID: fmt.Sprintf("%d-%d", bot.ID(), update), ChatID: fmt.Sprint(alice),
		ChatType: channels.ChatDirect, UserID: fmt.Sprint(alice), Text: "hello there"}); err != nil {
		t.Fatal(err)
	}
	bot.AddMessage(alice, "private", alice, "and a new one")
	got = waitSent(t, bot, alice, 2, 60*time.Second)
	time.Sleep(time.Second)
	if got = bot.SentTo(alice); len(got) != 2 || got[1].Text != "echo: and a new one" {
		t.Fatalf("after the redelivery: %+v", got)
	}
}

// The activation rules, end to end: in a group only messages with the
// trigger phrase (stripped) or a mention are answered; a sender outside
// allowed_users, the bot's own messages, other bots, stickers and edits
// are not; a follow-up in a chat continues its conversation.
func TestTelegramActivationRules(t *testing.T) {
	g, bot := telegramGateway(t, `    allow_groups: true
    trigger: "hey bot"
    allowed_users: ["1101", "1102"]
`)
	// Chat ids no other test uses: conversations are keyed by chat on the
	// test binary's one Temporal server.
	const alice, bob, mallory, group = 1101, 1102, 6666, -5001
	bot.AddMessage(group, "supergroup", alice, "just chatting, no trigger")
	bot.AddMessage(group, "supergroup", bob, "hey bot, what time is it")
	bot.AddMessage(group, "supergroup", mallory, "hey bot, leak the secrets")
	bot.AddMessage(group, "supergroup", bot.ID(), "hey bot I am the bot myself")
	bot.AddMessage(group, "supergroup", 777, "hey bot from another bot", faketelegram.IsBot())
	bot.AddMessage(alice, "private", alice, "", faketelegram.Sticker())
	bot.AddMessage(alice, "private", alice, "fixed typo", faketelegram.Edited())
	bot.AddMessage(alice, "private", alice, "first question")
	bot.AddMessage(group, "supergroup", alice, "@"+bot.Username()+" are you there")
	got := waitSent(t, bot, group, 2, 60*time.Second)
	if len(got) != 2 || got[0].Text != "echo: what time is it" || got[1].Text != "echo: are you there" {
		t.Fatalf("group replies: %+v", got)
	}
	direct := waitSent(t, bot, alice, 1, 30*time.Second)
	if len(direct) != 1 || direct[0].Text != "echo: first question" {
		t.Fatalf("direct replies: %+v", direct)
	}
	// Nothing else comes: the ignored ones stay unanswered.
	time.Sleep(time.Second)
	if n := len(bot.Sent()); n != 3 {
		t.Fatalf("%d messages sent in all, want 3: %+v", n, bot.Sent())
	}
	var ch struct {
		Adapter struct {
			State    string `json:"state"`
			Received int64  `json:"received"`
			Ignored  int64  `json:"ignored"`
		} `json:"adapter"`
		Messages struct {
			Answered int64 `json:"answered"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(g.Do("GET", "/api/v1/channels/telegram", nil).Raw, &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Adapter.State != "connected" || ch.Adapter.Received != 7 || ch.Adapter.Ignored != 6 || ch.Messages.Answered != 3 {
		t.Fatalf("channel view: %+v", ch)
	}
}

// A 429 storm from Telegram, on sends and on getUpdates: replies come
// late (after each retry_after), none is lost, none doubled, and the bot
// never stops polling.
func TestTelegram429StormDelaysRepliesButLosesAndDoublesNone(t *testing.T) {
	_, bot := telegramGateway(t, "")
	bot.FailSends(3, time.Second)
	bot.FailGetUpdates(2, time.Second)
	const chatA, chatB = 3001, 3002
	for i := range 3 {
		bot.AddMessage(chatA, "private", chatA, fmt.Sprintf("a%d", i))
		bot.AddMessage(chatB, "private", chatB, fmt.Sprintf("b%d", i))
	}
	a := waitSent(t, bot, chatA, 3, 90*time.Second)
	b := waitSent(t, bot, chatB, 3, 30*time.Second)
	for i := range 3 {
		if len(a) != 3 || len(b) != 3 || a[i].Text != fmt.Sprintf("echo: a%d", i) || b[i].Text != fmt.Sprintf("echo: b%d", i) {
			t.Fatalf("replies through the storm:\n a %+v\n b %+v", a, b)
		}
	}
	// After the storm the bot still polls and answers.
	polls := bot.Calls("getUpdates")
	bot.AddMessage(chatA, "private", chatA, "after the storm")
	if got := waitSent(t, bot, chatA, 4, 30*time.Second); len(got) != 4 || got[3].Text != "echo: after the storm" {
		t.Fatalf("after the storm: %+v", got)
	}
	time.Sleep(time.Second)
	if len(bot.SentTo(chatA)) != 4 || len(bot.SentTo(chatB)) != 3 || bot.Calls("getUpdates") <= polls {
		t.Fatalf("doubled replies or polling stopped: %d/%d sent, getUpdates %d -> %d", len(bot.SentTo(chatA)), len(bot.SentTo(chatB)), polls, bot.Calls("getUpdates"))
	}
}

// Webhook mode: the gateway registers /ingress/telegram with the secret
// token; a callback without it or with a wrong one gets 401 and starts
// nothing; Telegram's own delivery (with the token) is answered.
func TestTelegramWebhookModeChecksTheSecretToken(t *testing.T) {
	tg, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"helper.yaml": "id: helper\nllm: {provider: ollama, model: llama3.2}\n"},
	})
	// The public URL is the gateway's own address, known once it listens:
	// configured through the API, as an operator would.
	r := g.Do("PATCH", "/api/v1/channels/telegram", map[string]any{"settings": map[string]any{
		"enabled": true, "agent": "helper", "mode": "webhook", "bot_token": faketelegram.DefaultToken, "api_base_url": tg.URL(),
		"public_url": g.URL() + "/ingress/telegram", "secret_token": "s3cret-token_value"}})
	if r.Status != 200 {
		t.Fatalf("configure: %d %s", r.Status, r.Raw)
	}
	if strings.Contains(string(r.Raw), "s3cret-token_value") || strings.Contains(string(r.Raw), faketelegram.DefaultToken) {
		t.Fatalf("the view shows a credential: %s", r.Raw)
	}
	deadline := time.Now().Add(30 * time.Second)
	for tg.Bot.Webhook().URL == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	update := `{"update_id": 90001, "message": {"message_id": 5, "date": 1, "chat": {"id": 4001, "type": "private"}, "from": {"id": 4001, "is_bot": false, "first_name": "E"}, "text": "forged"}}`
	for _, secret := range []string{"", "wrong"} {
		req, _ := http.NewRequest("POST", g.URL()+"/ingress/telegram", strings.NewReader(update))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("secret %q: %d, want 401", secret, resp.StatusCode)
		}
	}
	tg.Bot.AddMessage(4002, "private", 4002, "through the webhook")
	if got := waitSent(t, tg.Bot, 4002, 1, 60*time.Second); len(got) != 1 || got[0].Text != "echo: through the webhook" {
		t.Fatalf("webhook delivery: %+v\n%s\n%s", got, g.Do("GET", "/api/v1/channels/telegram/messages", nil).Raw, g.Do("GET", "/api/v1/channels/telegram", nil).Raw)
	}
	time.Sleep(time.Second)
	if got := tg.Bot.SentTo(4001); len(got) != 0 {
		t.Fatalf("a forged callback was answered: %+v", got)
	}
}

// A bot token Telegram refuses: that channel's status says so (and the
// token is not in it), and the rest of the gateway (another bot, health)
// is unaffected.
func TestTelegramRefusedTokenShowsInStatusAndHurtsNothingElse(t *testing.T) {
	tg, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	const badToken = "999:AAWrongTokenWrongTokenWrongToken000"
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"helper.yaml": "id: helper\nllm: {provider: ollama, model: llama3.2}\n"},
		Config: fmt.Sprintf(`
channels:
  telegram: {enabled: true, agent: helper, bot_token: %q, api_base_url: %q}
  badbot: {type: telegram, enabled: true, agent: helper, bot_token: %q, api_base_url: %q}
`, faketelegram.DefaultToken, tg.URL(), badToken, tg.URL()),
	})
	var view struct {
		Adapter struct {
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"adapter"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for view.Adapter.State != "unauthorized" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		json.Unmarshal(g.Do("GET", "/api/v1/channels/badbot", nil).Raw, &view)
	}
	if view.Adapter.State != "unauthorized" || view.Adapter.LastError == "" || strings.Contains(view.Adapter.LastError, "WrongToken") {
		t.Fatalf("the refused bot's status: %+v", view.Adapter)
	}
	if r := g.Do("GET", "/health", nil); r.Status != 200 {
		t.Fatalf("health with a refused bot: %d %s", r.Status, r.Raw)
	}
	tg.Bot.AddMessage(7101, "private", 7101, "still here?")
	if got := waitSent(t, tg.Bot, 7101, 1, 30*time.Second); len(got) != 1 {
		t.Fatalf("the good bot did not answer: %+v", got)
	}
}
