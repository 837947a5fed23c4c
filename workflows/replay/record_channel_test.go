package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/workflows"
)

// TestRecordChannel records a Telegram conversation: two messages answered
// (ChannelTurn children), a redelivery of the first one dropped (the
// conversation remembers the ids it handled), and a message sent to a chat through the API
// (a messaging Delivery). It runs only with -update.
func TestRecordChannel(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	tg, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"helper.yaml": "id: helper\nllm: {provider: ollama, model: llama3.2}\n"},
		Config: fmt.Sprintf("channels:\n  telegram: {enabled: true, agent: helper, bot_token: %q, api_base_url: %q}\n", faketelegram.DefaultToken, tg.URL()),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitSent := func(n int) {
		for len(tg.Bot.SentTo(4242)) < n {
			if ctx.Err() != nil {
				t.Fatalf("%d replies, want %d", len(tg.Bot.SentTo(4242)), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := tg.Bot.AddMessage(4242, "private", 4242, "first question")
	waitSent(1)
	conv := workflows.ChannelConversationWorkflowID("telegram", "4242", "")
	dup := workflows.ChannelMessage{ChannelID: "telegram", AgentID: "helper", MessageID: fmt.Sprintf("%d-%d", tg.Bot.ID(), first), ChatID: "4242", UserID: "4242", Text: "first question"}
	if err := g.Temporal.SignalWorkflow(ctx, conv, "", workflows.ChannelMessageSignal, dup); err != nil {
		t.Fatal(err)
	}
	tg.Bot.AddMessage(4242, "private", 4242, "second question")
	waitSent(2)
	r := g.Do("POST", "/api/v1/channels/telegram/send", map[string]string{"text": "the daily report", "to": "4242"})
	if r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	dlv := workflows.DeliveryWorkflowID(r.JSON["delivery_id"].(string))
	if err := g.Temporal.GetWorkflow(ctx, dlv, "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	turn := workflows.ChannelTurnWorkflowID("telegram", dup.MessageID)
	if err := g.Temporal.GetWorkflow(ctx, turn, "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	record(ctx, t, g.Temporal, conv, "ChannelConversation-duplicate.json")
	record(ctx, t, g.Temporal, turn, "ChannelTurn-answered.json")
	record(ctx, t, g.Temporal, dlv, "Delivery-telegram-chat.json")
}
