package slack_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/channels"
	slackch "github.com/agentryhq/agentry/internal/channels/slack"
)

func TestSendThreadsRepliesAndReturnsTheTS(t *testing.T) {
	r := newRig(t, nil)
	ctx := ctxT(t)
	top, err := r.adapter.Send(ctx, channels.Outbound{ChatID: "C1", ReplyTo: "1700000000.000100", Text: "top level", Group: true})
	if err != nil {
		t.Fatal(err)
	}
	threaded, err := r.adapter.Send(ctx, channels.Outbound{ChatID: "C1", ThreadID: "1700000000.000100", Text: "a < b & c"})
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Sent()
	if len(posts) != 2 {
		t.Fatalf("fake got %d posts, want 2", len(posts))
	}
	if p := posts[0]; p.Channel != "C1" || p.ThreadTS != "" || p.Text != "top level" || p.TS != top.PlatformID || top.PlatformID == "" {
		t.Errorf("top-level post %+v, sent %+v", p, top)
	}
	if p := posts[1]; p.ThreadTS != "1700000000.000100" || p.Text != "a &lt; b &amp; c" || p.TS != threaded.PlatformID {
		t.Errorf("threaded post %+v, sent %+v", p, threaded)
	}
}

func TestSend429IsRateLimitedWithTheRetryAfterAndNoHiddenRetry(t *testing.T) {
	r := newRig(t, nil)
	ctx := ctxT(t)
	r.fake.FailSends(1, 7*time.Second)
	_, err := r.adapter.Send(ctx, channels.Outbound{ChatID: "C1", Text: "hi"})
	var rl *channels.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("err %v, want RateLimited after 7s", err)
	}
	if n := len(r.fake.Sent()); n != 0 {
		t.Fatalf("the library retried by itself: %d posts", n)
	}
	if _, err := r.adapter.Send(ctx, channels.Outbound{ChatID: "C1", Text: "hi"}); err != nil {
		t.Fatalf("after the limit: %v", err)
	}
}

func TestSendToAGoneChannelIsRefused(t *testing.T) {
	r := newRig(t, nil)
	for _, code := range []string{"channel_not_found", "not_in_channel", "is_archived", "msg_too_long"} {
		r.fake.RefuseChannel("CGONE", code)
		_, err := r.adapter.Send(ctxT(t), channels.Outbound{ChatID: "CGONE", Text: "hi"})
		var ref *channels.Refused
		if !errors.As(err, &ref) || ref.Msg != code {
			t.Errorf("%s: err %v, want Refused", code, err)
		}
	}
}

func TestRefusedTokenMakesReceiveAndSendUnauthorized(t *testing.T) {
	r := newRig(t, nil)
	r.fake.RefuseToken()
	done := r.receive(t)
	select {
	case err := <-done:
		var ua *channels.Unauthorized
		if !errors.As(err, &ua) || ua.Msg != "invalid_auth" {
			t.Fatalf("Receive returned %v, want Unauthorized", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Receive did not stop on a refused token")
	}
	if v := r.status.View(); v.State != channels.StateUnauthorized || !strings.Contains(v.LastError, "invalid_auth") {
		t.Errorf("status %+v, want unauthorized", v)
	}
	_, err := r.adapter.Send(ctxT(t), channels.Outbound{ChatID: "C1", Text: "hi"})
	var ua *channels.Unauthorized
	if !errors.As(err, &ua) {
		t.Errorf("Send: %v, want Unauthorized", err)
	}
	// An events-mode callback cannot be mapped without the bot's
	// identity: 500, so Slack retries once the token is fixed.
	d := r.fake.Deliver(ctxT(t), r.ingress, r.fake.Message("C1", "channel", "U1", "hi"))
	if d.OK || len(r.sink.all()) != 0 {
		t.Errorf("delivery %+v with a refused token", d)
	}
}

func TestEventsModeReceiveIdentifiesTheBotAndWaits(t *testing.T) {
	r := newRig(t, nil)
	r.receive(t)
	r.waitState(t, channels.StateConnected)
	if v := r.status.View(); v.Detail["bot_user"] != "U0BOT" {
		t.Errorf("status %+v", v)
	}
}

func TestNewRefusesIncompleteSettings(t *testing.T) {
	cases := map[string]channels.Settings{
		"signing_secret": {ID: "s", BotToken: "xoxb-1"},
		"app_token":      {ID: "s", BotToken: "xoxb-1", Mode: "socket", SigningSecret: "x"},
		"bot_token":      {ID: "s", SigningSecret: "x"},
		"mode":           {ID: "s", BotToken: "xoxb-1", SigningSecret: "x", Mode: "rtm"},
	}
	for field, s := range cases {
		_, err := slackch.New(channels.Deps{Settings: s, Status: &channels.Status{}})
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err %v", field, err)
		}
	}
	if a, err := slackch.New(channels.Deps{Settings: channels.Settings{BotToken: "xoxb-1", SigningSecret: "x"}}); err != nil ||
		a.Limits().MaxText != 4000 || a.Limits().PerChat != time.Second || a.Limits().PerBotPerSecond != 0 {
		t.Errorf("events mode by default: %v %+v", err, a)
	}
}
