package e2e

import (
	"context"
	"encoding/json"
	"fmt"
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
	if err := enq.Enqueue(ctx, "telegram", "helper", channels.Inbound{MessageID: fmt.Sprint(update), ChatID: fmt.Sprint(alice),
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
    allowed_users: ["1001", "1002"]
`)
	const alice, bob, mallory, group = 1001, 1002, 6666, -5001
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
	time.Sleep(2 * time.Second)
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
