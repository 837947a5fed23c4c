package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// platformDriver is one messaging platform's fake, as the channel crash
// test drives it.
type platformDriver interface {
	// env are the gateway's settings of the channel (AGENTRY_CHANNELS_...).
	env(gatewayURL string) map[string]string
	// post makes user send text in chat i.
	post(t *testing.T, chat int, text string)
	// sent are the texts the bot sent to chat i, in order.
	sent(chat int) []string
	// lastSend is when the bot last sent anything, and how many it sent.
	lastSend() (time.Time, int)
	// restarted is told the gateway is back (platforms that redeliver
	// what the dead gateway did not acknowledge do it now).
	restarted(t *testing.T)
}

// The messaging channels' crash test (issue 44): 3 chats x 20 messages in
// flight, the gateway SIGKILLed at a random moment and restarted on the
// same workspace. Every message is answered exactly once, in order per
// chat; nothing answered before the crash is answered again after it.
//
// The kill waits for a moment without a send in the last 150 ms: the one
// window no platform without an idempotency key can close is between the
// platform taking a reply and Temporal recording that it did, and it is
// documented (docs/channels.md, "Delivery guarantees") rather than tested
// here.
func crashChannel(t *testing.T, d platformDriver) {
	bin := gatewaytest.Binary(t, "agentryd")
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	// Turns take a while, so messages queue behind each other.
	fake.Script(fakellm.Rule{Contains: "msg", Delay: fakellm.Duration(150 * time.Millisecond)})
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "helper.yaml"), []byte("id: helper\nllm: {provider: ollama, model: llama3.2}\n"), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	env := map[string]string{
		"AGENTRY_WORKSPACE":                       ws,
		"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
		"AGENTRY_SERVER_API_KEY":                  "crash-channels-key-0123456789",
		"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
		"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":    "false",
		"AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL":   fake.URL(),
	}
	for k, v := range d.env(base) {
		env[k] = v
	}
	const chats, perChat = 3, 20
	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	for i := range perChat {
		for c := range chats {
			d.post(t, c, fmt.Sprintf("msg %d-%02d", c, i))
		}
	}
	// Kill once some replies went out, at a random moment after that.
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, n := d.lastSend(); n >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replies before the kill\n%s", first.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
	for {
		at, _ := d.lastSend()
		if time.Since(at) > 150*time.Millisecond {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, before := d.lastSend()
	first.Kill(t)
	t.Logf("killed after %d replies", before)

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	d.restarted(t)
	deadline = time.Now().Add(3 * time.Minute)
	for {
		done := true
		for c := range chats {
			if len(d.sent(c)) < perChat {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a duplicate would come now
	for c := range chats {
		got := d.sent(c)
		want := make([]string, perChat)
		for i := range perChat {
			want[i] = fmt.Sprintf("echo: msg %d-%02d", c, i)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("chat %d got %d replies, want each message answered once in order:\n got %q\nwant %q", c, len(got), got, want)
		}
	}
	if t.Failed() {
		t.Logf("first process:\n%s\nsecond process:\n%s", first.Output, second.Output)
	}
}

type telegramDriver struct {
	url string
	bot *faketelegram.Bot
}

func (d *telegramDriver) env(string) map[string]string {
	return map[string]string{
		"AGENTRY_CHANNELS_TELEGRAM_ENABLED":      "true",
		"AGENTRY_CHANNELS_TELEGRAM_AGENT":        "helper",
		"AGENTRY_CHANNELS_TELEGRAM_BOT_TOKEN":    faketelegram.DefaultToken,
		"AGENTRY_CHANNELS_TELEGRAM_API_BASE_URL": d.url,
	}
}

func (d *telegramDriver) post(_ *testing.T, chat int, text string) {
	id := int64(2000 + chat)
	d.bot.AddMessage(id, "private", id, text)
}

func (d *telegramDriver) sent(chat int) []string {
	var out []string
	for _, m := range d.bot.SentTo(int64(2000 + chat)) {
		out = append(out, m.Text)
	}
	return out
}

func (d *telegramDriver) lastSend() (time.Time, int) {
	all := d.bot.Sent()
	if len(all) == 0 {
		return time.Time{}, 0
	}
	return all[len(all)-1].At, len(all)
}

func (d *telegramDriver) restarted(*testing.T) {}

func TestTelegramChannelSurvivesGatewayCrash(t *testing.T) {
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	srv, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	crashChannel(t, &telegramDriver{url: srv.URL(), bot: srv.Bot})
	// The offset confirmed every update (none left pending), and never one
	// before it was accepted: each was answered above.
	if p := srv.Bot.Pending(); p != 0 {
		t.Fatalf("%d updates never confirmed", p)
	}
}
