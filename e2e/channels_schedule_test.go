package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeslack"
	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/models"
)

// A scheduled agent's report goes to a Telegram chat and to a Slack
// channel (schedule.output.channel names a messaging channel, output.to
// the chat), as a Delivery recorded with the chat as its target; the
// report's LLM call is in the ledger as scheduled, a channel message's as
// channel (cost rule 1).
func TestScheduledReportsAreDeliveredToTelegramAndSlack(t *testing.T) {
	tg, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	sl, err := fakeslack.Start(fakeslack.Options{BotToken: "xoxb-report", SigningSecret: "report-signing-secret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Close)
	report := func(id, channel, to string) string {
		return fmt.Sprintf("id: %s\ntrigger: cron\nllm: {provider: ollama, model: llama3.2}\nschedule:\n  cron: \"0 6 * * *\"\n  prompt: daily numbers for %s\n  output: {channel: %s, to: %q}\n", id, channel, channel, to)
	}
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{
			"tgreport.yaml":    report("tgreport", "telegram", "-7001"),
			"slackreport.yaml": report("slackreport", "slack", "C0REPORTS"),
			"helper.yaml":      "id: helper\nllm: {provider: ollama, model: llama3.2}\n",
		},
		Config: fmt.Sprintf(`
channels:
  telegram: {enabled: true, agent: helper, bot_token: %q, api_base_url: %q}
  slack: {enabled: true, agent: helper, bot_token: xoxb-report, signing_secret: report-signing-secret, api_base_url: %q}
`, faketelegram.DefaultToken, tg.URL(), sl.APIURL()),
	})
	deleteScheduleAfter(t, gatewaytest.SharedTemporal(t), g.Config.Temporal.TaskQueue+":schedule:tgreport")
	deleteScheduleAfter(t, gatewaytest.SharedTemporal(t), g.Config.Temporal.TaskQueue+":schedule:slackreport")
	// The bot is in the report's group (Telegram answers "chat not found"
	// for a chat the bot never joined); the group's chatter is not
	// answered (allow_groups is off).
	tg.Bot.AddMessage(-7001, "supergroup", 55, "the bot joined")
	for _, id := range []string{"tgreport", "slackreport"} {
		if r := g.Do("POST", "/api/v1/schedules/"+id+"/trigger", nil); r.Status != 202 {
			t.Fatalf("trigger %s: %d %s", id, r.Status, r.Raw)
		}
	}
	waitUntil(t, 60*time.Second, "the Telegram report", func() bool { return len(tg.Bot.SentTo(-7001)) == 1 })
	if got := tg.Bot.SentTo(-7001)[0].Text; got != "echo: daily numbers for telegram" {
		t.Fatalf("telegram report: %q", got)
	}
	waitUntil(t, 30*time.Second, "the Slack report", func() bool { return len(sl.Sent()) == 1 })
	if p := sl.Sent()[0]; p.Channel != "C0REPORTS" || p.Text != "echo: daily numbers for slack" {
		t.Fatalf("slack report: %+v", p)
	}
	waitUntil(t, 30*time.Second, "both deliveries recorded delivered", func() bool {
		var n int64
		g.Store.DB.Model(&models.Delivery{}).Where("status = ? AND target IN ?", models.DeliveryDelivered, []string{"chat:-7001", "chat:C0REPORTS"}).Count(&n)
		return n == 2
	})
	// A message to a messaging channel needs a chat; a disabled channel refuses.
	if r := g.Do("POST", "/api/v1/channels/telegram/send", map[string]string{"text": "hi"}); r.Status != 409 {
		t.Fatalf("send without to: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("POST", "/api/v1/channels/discord/send", map[string]string{"text": "hi", "to": "1"}); r.Status != 409 {
		t.Fatalf("send on a disabled channel: %d %s", r.Status, r.Raw)
	}
	// A channel message's LLM call is attributed to the channel.
	tg.Bot.AddMessage(7002, "private", 7002, "and how are you")
	waitUntil(t, 60*time.Second, "the channel reply", func() bool { return len(tg.Bot.SentTo(7002)) == 1 })
	var n int64
	g.Store.DB.Model(&models.LedgerEntry{}).Where("source = ? AND trigger = ? AND agent_id = ?", "channel", "channel", "helper").Count(&n)
	if n != 1 {
		t.Fatalf("%d ledger rows of source and trigger channel, want 1", n)
	}
}
