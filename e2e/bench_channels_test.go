package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// BenchmarkChannelTelegram measures the Telegram channel end to end on
// one machine: the fake Bot API (long polling), the gateway, embedded
// Temporal and a fake model that answers at once, so everything measured
// is what the gateway adds over the LLM's time.
//
//   - latency: one message at a time, each in its own chat, from the update
//     being queued at the fake to the reply reaching its sendMessage
//     (p50, p99);
//
//   - throughput: 100 chats x 10 messages queued at once, replies per
//     second until the last is sent, first with the gateway's send pacing
//     off (its own capacity), then with Telegram's published limits (1 per
//     chat per second, 30 per second per bot), which bound it.
//
//     go test -run '^$' -bench ChannelTelegram -benchtime 1x ./e2e/
func BenchmarkChannelTelegram(b *testing.B) {
	tg, err := faketelegram.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(tg.Close)
	g := gatewaytest.Start(b, gatewaytest.Options{
		Agents: map[string]string{"helper.yaml": "id: helper\nllm: {provider: ollama, model: llama3.2}\n"},
		Config: fmt.Sprintf("channels:\n  telegram: {enabled: true, agent: helper, bot_token: %q, api_base_url: %q}\n", faketelegram.DefaultToken, tg.URL()),
	})
	bot := tg.Bot
	next := int64(100_000)
	wait := func(chat int64, n int) time.Time {
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if s := bot.SentTo(chat); len(s) >= n {
				return s[n-1].At
			}
			if time.Now().After(deadline) {
				b.Fatalf("chat %d: %d replies, want %d", chat, len(bot.SentTo(chat)), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Warm up (first workflow tasks, connections).
	for range 5 {
		next++
		bot.AddMessage(next, "private", next, "warm up")
		wait(next, 1)
	}
	b.ResetTimer()
	const sequential = 200
	lat := make([]time.Duration, 0, sequential)
	for range sequential {
		next++
		start := time.Now()
		bot.AddMessage(next, "private", next, "ping")
		lat = append(lat, wait(next, 1).Sub(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")

	burst := func(perChat int) float64 {
		const chats = 100
		first := next + 1
		start := time.Now()
		for i := range perChat {
			for c := range chats {
				bot.AddMessage(first+int64(c), "private", first+int64(c), fmt.Sprintf("m%d", i))
			}
		}
		var last time.Time
		for c := range chats {
			if at := wait(first+int64(c), perChat); at.After(last) {
				last = at
			}
		}
		next += chats
		return float64(chats*perChat) / last.Sub(start).Seconds()
	}
	g.Services().Messaging.Unpaced = true
	b.ReportMetric(burst(10), "msg/s-unpaced")
	g.Services().Messaging.Unpaced = false
	b.ReportMetric(burst(3), "msg/s-telegram-limits")
}
