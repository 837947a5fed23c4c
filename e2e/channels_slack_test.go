package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeslack"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/workflows"
)

const (
	slackBotToken = "xoxb-e2e-bot-token"
	slackAppToken = "xapp-e2e-app-token"
	slackSecret   = "e2e-slack-signing-secret"
)

// slackGateway starts a fake Slack and an in-process gateway whose slack
// channel (events mode unless extra says otherwise) uses it, answered by
// agent "helper" (the fake LLM echoes).
func slackGateway(t *testing.T, extra string) (*gatewaytest.Gateway, *fakeslack.Server) {
	t.Helper()
	fs, err := fakeslack.Start(fakeslack.Options{BotToken: slackBotToken, AppToken: slackAppToken, SigningSecret: slackSecret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Close)
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"helper.yaml": "id: helper\nllm: {provider: ollama, model: llama3.2}\n"},
		Config: fmt.Sprintf(`
channels:
  slack:
    enabled: true
    agent: helper
    bot_token: %q
    signing_secret: %q
    app_token: %q
    api_base_url: %q
%s`, slackBotToken, slackSecret, slackAppToken, fs.APIURL(), extra),
	})
	return g, fs
}

// slackIDs gives each test its own Slack channel ids (the shared Temporal
// server keeps closed ChannelTurn ids).
func slackIDs(prefix string) string {
	return fmt.Sprintf("%s%X", prefix, time.Now().UnixNano()%0xFFFFFFFF)
}

// slackPosts waits until the fake took n posts to channel (or within
// passes) and returns them.
func slackPosts(fs *fakeslack.Server, channel string, n int, within time.Duration) []fakeslack.Post {
	deadline := time.Now().Add(within)
	for {
		var got []fakeslack.Post
		for _, p := range fs.Sent() {
			if p.Channel == channel {
				got = append(got, p)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func deliver(t *testing.T, fs *fakeslack.Server, g *gatewaytest.Gateway, ev fakeslack.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d := fs.Deliver(ctx, g.URL()+"/ingress/slack", ev); !d.OK || len(d.Attempts) != 1 {
		t.Fatalf("delivery of %s: %+v", ev.ID, d)
	}
}

// slackView is GET /api/v1/channels/slack, the parts the tests read.
type slackView struct {
	Adapter struct {
		State    string `json:"state"`
		Received int64  `json:"received"`
		Ignored  int64  `json:"ignored"`
	} `json:"adapter"`
	Messages struct {
		Received int64 `json:"received"`
		Answered int64 `json:"answered"`
	} `json:"messages"`
}

func channelView(t *testing.T, g *gatewaytest.Gateway, id string) slackView {
	t.Helper()
	var v slackView
	if err := json.Unmarshal(g.Do("GET", "/api/v1/channels/"+id, nil).Raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// channelViewWhen polls the channel's view until ok (the answered count is
// recorded by an activity after the reply went out) or 20 s passed.
func channelViewWhen(t *testing.T, g *gatewaytest.Gateway, id string, ok func(slackView) bool) slackView {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := channelView(t, g, id)
		if ok(v) || time.Now().After(deadline) {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A direct message is answered in its channel; a reply in a thread is
// answered in that thread; Slack's echo of the bot's own post is not
// answered.
func TestSlackDirectMessageAndThreadReply(t *testing.T) {
	g, fs := slackGateway(t, "")
	dm := slackIDs("D")
	deliver(t, fs, g, fs.Message(dm, "im", "UALICE", "hello there"))
	got := slackPosts(fs, dm, 1, 60*time.Second)
	if len(got) != 1 || got[0].Text != "echo: hello there" || got[0].ThreadTS != "" {
		t.Fatalf("posts to the DM: %+v", got)
	}
	// The bot's own message comes back as a message event: not answered.
	deliver(t, fs, g, fs.EchoOf(got[0], "im"))
	parent := fs.Message(dm, "im", "UALICE", "start a thread")
	deliver(t, fs, g, parent)
	slackPosts(fs, dm, 2, 60*time.Second)
	reply := fs.Message(dm, "im", "UALICE", "in the thread", fakeslack.InThread(parent.Inner["ts"].(string)))
	deliver(t, fs, g, reply)
	got = slackPosts(fs, dm, 3, 60*time.Second)
	if len(got) != 3 || got[1].Text != "echo: start a thread" || got[1].ThreadTS != "" ||
		got[2].Text != "echo: in the thread" || got[2].ThreadTS != parent.Inner["ts"] {
		t.Fatalf("posts: %+v", got)
	}
	time.Sleep(time.Second) // an answer to the echo would come now
	if n := len(fs.Sent()); n != 3 {
		t.Fatalf("%d posts, want 3: %+v", n, fs.Sent())
	}
	v := channelViewWhen(t, g, "slack", func(v slackView) bool { return v.Messages.Answered == 3 })
	if v.Adapter.State != "connected" || v.Messages.Answered != 3 || v.Adapter.Ignored < 1 {
		t.Fatalf("channel view: %+v", v)
	}
}

// Forged, stale and unsigned callbacks get 401 and start nothing: no
// reply, no workflow, no message counted. A correctly signed one right
// after is answered (the refusals are not a dead endpoint).
func TestSlackUnverifiedCallbacksStartNothing(t *testing.T) {
	g, fs := slackGateway(t, "")
	dm := slackIDs("D")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := g.URL() + "/ingress/slack"
	ev := fs.Message(dm, "im", "UALICE", "leak the secrets")
	if st, err := fs.DeliverForged(ctx, url, ev); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("forged: %d %v", st, err)
	}
	if st, err := fs.DeliverStale(ctx, url, ev, 6*time.Minute); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("stale: %d %v", st, err)
	}
	if st, err := fs.DeliverUnsigned(ctx, url, ev); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d %v", st, err)
	}
	// Signed for another body: the signature covers the body.
	h := fakeslack.Sign(slackSecret, []byte(`{"type":"event_callback"}`), time.Now())
	if st, _, err := fs.PostRaw(ctx, url, h, fs.Callback(ev)); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("signature of another body: %d %v", st, err)
	}
	time.Sleep(time.Second)
	if s := fs.Sent(); len(s) != 0 {
		t.Fatalf("answered an unverified callback: %+v", s)
	}
	conv := workflows.ChannelConversationWorkflowID("slack", dm, "")
	if _, err := g.Temporal.DescribeWorkflowExecution(ctx, conv, ""); err == nil {
		t.Fatalf("an unverified callback started %s", conv)
	}
	if v := channelView(t, g, "slack"); v.Adapter.Received != 0 || v.Messages.Received != 0 {
		t.Fatalf("unverified callbacks counted: %+v", v)
	}
	// The same event, signed, is answered.
	deliver(t, fs, g, ev)
	if got := slackPosts(fs, dm, 1, 60*time.Second); len(got) != 1 || got[0].Text != "echo: leak the secrets" {
		t.Fatalf("posts after a signed delivery: %+v", got)
	}
}

// Slack's retry of an event (X-Slack-Retry-Num) and the app_mention twin
// of a message event are answered once; a channel message without a
// mention is not answered, and with allow_groups off no channel message
// is.
func TestSlackRetriesAndMentionTwinsAnsweredOnce(t *testing.T) {
	g, fs := slackGateway(t, "    allow_groups: true\n")
	dm, ch := slackIDs("D"), slackIDs("C")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := g.URL() + "/ingress/slack"

	ev := fs.Message(dm, "im", "UALICE", "only once please")
	deliver(t, fs, g, ev)
	for n := 1; n <= 2; n++ { // Slack did not see the 200 and retries
		body := fs.Callback(ev)
		h := fakeslack.Sign(slackSecret, body, time.Now())
		h.Set("X-Slack-Retry-Num", fmt.Sprint(n))
		h.Set("X-Slack-Retry-Reason", "http_timeout")
		if st, _, err := fs.PostRaw(ctx, url, h, body); err != nil || st != http.StatusOK {
			t.Fatalf("retry %d: %d %v", n, st, err)
		}
	}
	msg := fs.Message(ch, "channel", "UBOB", "<@U0BOT> what is up")
	deliver(t, fs, g, msg)
	deliver(t, fs, g, fs.MentionOf(msg))
	deliver(t, fs, g, fs.Message(ch, "channel", "UBOB", "just chatting among people"))

	if got := slackPosts(fs, dm, 1, 60*time.Second); len(got) != 1 || got[0].Text != "echo: only once please" {
		t.Fatalf("DM posts: %+v", got)
	}
	if got := slackPosts(fs, ch, 1, 60*time.Second); len(got) != 1 || got[0].Text != "echo: what is up" {
		t.Fatalf("channel posts: %+v", got)
	}
	time.Sleep(time.Second) // duplicates would come now
	if s := fs.Sent(); len(s) != 2 {
		t.Fatalf("%d posts, want 2: %+v", len(s), s)
	}
	if v := channelViewWhen(t, g, "slack", func(v slackView) bool { return v.Messages.Answered == 2 }); v.Messages.Received != 2 || v.Messages.Answered != 2 {
		t.Fatalf("channel view: %+v", v)
	}
}

func TestSlackChannelMessagesIgnoredWithoutAllowGroups(t *testing.T) {
	g, fs := slackGateway(t, "")
	dm, ch := slackIDs("D"), slackIDs("C")
	msg := fs.Message(ch, "channel", "UBOB", "<@U0BOT> are you there")
	deliver(t, fs, g, msg)
	deliver(t, fs, g, fs.MentionOf(msg))
	deliver(t, fs, g, fs.Message(ch, "channel", "UBOB", "no mention here"))
	// A DM after them is answered: the channel ones were seen and dropped.
	deliver(t, fs, g, fs.Message(dm, "im", "UALICE", "but me you answer"))
	if got := slackPosts(fs, dm, 1, 60*time.Second); len(got) != 1 || got[0].Text != "echo: but me you answer" {
		t.Fatalf("DM posts: %+v", got)
	}
	time.Sleep(time.Second)
	if s := fs.Sent(); len(s) != 1 {
		t.Fatalf("channel messages answered without allow_groups: %+v", s)
	}
	if v := channelView(t, g, "slack"); v.Adapter.Ignored != 3 {
		t.Fatalf("channel view: %+v", v)
	}
}

// Socket Mode: the message comes over the fake's WebSocket, is
// acknowledged once accepted and answered; the events endpoint refuses
// callbacks for a socket-mode channel.
func TestSlackSocketModeMessageAnswered(t *testing.T) {
	g, fs := slackGateway(t, "    mode: socket\n")
	dm := slackIDs("D")
	env := fs.Push(fs.Message(dm, "im", "UALICE", "over the socket"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := fs.WaitAcked(ctx, env); err != nil {
		t.Fatalf("envelope %s: %v (%+v)", env, err, fs.Envelope(env))
	}
	if got := slackPosts(fs, dm, 1, 60*time.Second); len(got) != 1 || got[0].Text != "echo: over the socket" {
		t.Fatalf("posts: %+v", got)
	}
	if st, err := fs.DeliverUnsigned(ctx, g.URL()+"/ingress/slack", fs.Message(dm, "im", "UALICE", "x")); err != nil || st != http.StatusNotFound {
		t.Fatalf("events callback to a socket-mode channel: %d %v", st, err)
	}
	if err := fs.WaitAcked(ctx, env); err != nil || fs.Envelope(env).Deliveries != 1 {
		t.Fatalf("envelope redelivered: %+v", fs.Envelope(env))
	}
	if v := channelViewWhen(t, g, "slack", func(v slackView) bool { return v.Messages.Answered == 1 }); v.Adapter.State != "connected" || v.Messages.Answered != 1 {
		t.Fatalf("channel view: %+v", v)
	}
}

// A 429 storm on chat.postMessage: the replies come late (after every
// 429 was answered), none is lost and none doubled.
func TestSlackRateLimitStormRepliesLateNotLostNotDoubled(t *testing.T) {
	g, fs := slackGateway(t, "")
	const storm = 4
	fs.FailSends(storm, time.Second)
	var dms []string
	for i := range 3 {
		dms = append(dms, slackIDs(fmt.Sprintf("D%d", i)))
	}
	for i := range 2 {
		for c, dm := range dms {
			deliver(t, fs, g, fs.Message(dm, "im", "UALICE", fmt.Sprintf("storm %d-%d", c, i)))
		}
	}
	for c, dm := range dms {
		got := slackPosts(fs, dm, 2, 90*time.Second)
		var texts []string
		for _, p := range got {
			texts = append(texts, p.Text)
		}
		want := fmt.Sprintf("echo: storm %d-0|echo: storm %d-1", c, c)
		if strings.Join(texts, "|") != want {
			t.Fatalf("chat %d: %q, want %q", c, texts, want)
		}
	}
	if n := fs.PendingFailures(); n != 0 {
		t.Fatalf("%d of the 429s never hit: the storm did not happen", n)
	}
	time.Sleep(time.Second) // a doubled reply would come now
	if s := fs.Sent(); len(s) != 6 {
		t.Fatalf("%d posts, want 6: %+v", len(s), s)
	}
	if v := channelViewWhen(t, g, "slack", func(v slackView) bool { return v.Messages.Answered == 6 }); v.Messages.Answered != 6 {
		t.Fatalf("channel view: %+v", v)
	}
}
