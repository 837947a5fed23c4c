package slack_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeslack"
	"github.com/agentryhq/agentry/internal/channels"
)

func TestSignedMessageReachesSinkAndIsAnswered200(t *testing.T) {
	r := newRig(t, nil)
	ev := r.fake.Message("C1", "channel", "U1", "<@U0BOT> what is the weather?")
	d := r.fake.Deliver(ctxT(t), r.ingress, ev)
	if !d.OK || len(d.Attempts) != 1 || d.Attempts[0].Status != http.StatusOK {
		t.Fatalf("delivery %+v, want one 200", d)
	}
	got := r.sink.all()
	if len(got) != 1 {
		t.Fatalf("sink got %d messages, want 1", len(got))
	}
	m, ts := got[0], ev.Inner["ts"].(string)
	if m.MessageID != "C1:"+ts || m.ChatID != "C1" || m.ChatType != channels.ChatGroup || m.UserID != "U1" {
		t.Errorf("mapped %+v", m)
	}
	if m.Text != "what is the weather?" || !m.Mentioned || m.FromSelf || m.FromBot {
		t.Errorf("text %q mentioned %v self %v bot %v", m.Text, m.Mentioned, m.FromSelf, m.FromBot)
	}
	if m.ThreadID != "" || m.ReplyTo != ts || m.At.IsZero() {
		t.Errorf("thread %q reply_to %q at %v", m.ThreadID, m.ReplyTo, m.At)
	}
	if v := r.status.View(); v.Received != 1 || v.Detail["bot_user"] != "U0BOT" {
		t.Errorf("status %+v", v)
	}
}

func TestForgedMissingAndStaleSignaturesGet401AndReachNoSink(t *testing.T) {
	r := newRig(t, nil)
	ctx := ctxT(t)
	ev := r.fake.Message("C1", "channel", "U1", "hello <@U0BOT>")
	if st, err := r.fake.DeliverForged(ctx, r.ingress, ev); err != nil || st != http.StatusUnauthorized {
		t.Errorf("forged: %d %v, want 401", st, err)
	}
	if st, err := r.fake.DeliverUnsigned(ctx, r.ingress, ev); err != nil || st != http.StatusUnauthorized {
		t.Errorf("missing: %d %v, want 401", st, err)
	}
	if st, err := r.fake.DeliverStale(ctx, r.ingress, ev, 6*time.Minute); err != nil || st != http.StatusUnauthorized {
		t.Errorf("stale: %d %v, want 401", st, err)
	}
	// A signature from the future is as bad as one from the past.
	if st, err := r.fake.DeliverStale(ctx, r.ingress, ev, -6*time.Minute); err != nil || st != http.StatusUnauthorized {
		t.Errorf("future: %d %v, want 401", st, err)
	}
	// A body changed after signing.
	body := r.fake.Callback(ev)
	h := fakeslack.Sign(secret, body, time.Now())
	tampered := []byte(strings.Replace(string(body), "hello", "HELLO", 1))
	if st, _, err := r.fake.PostRaw(ctx, r.ingress, h, tampered); err != nil || st != http.StatusUnauthorized {
		t.Errorf("tampered: %d %v, want 401", st, err)
	}
	if got := r.sink.all(); len(got) != 0 {
		t.Fatalf("sink got %d messages from unverified requests", len(got))
	}
	// Inside the window (4 minutes old) the same message is taken.
	if st, err := r.fake.DeliverStale(ctx, r.ingress, ev, 4*time.Minute); err != nil || st != http.StatusOK {
		t.Errorf("4 minutes old: %d %v, want 200", st, err)
	}
	if got := r.sink.all(); len(got) != 1 {
		t.Fatalf("sink got %d, want 1", len(got))
	}
	if strings.Contains(r.logs.Text(), secret) || strings.Contains(r.logs.Text(), botToken) {
		t.Error("a secret reached the log")
	}
}

func TestURLVerificationEchoesTheChallenge(t *testing.T) {
	r := newRig(t, nil)
	st, body, err := r.fake.URLVerification(ctxT(t), r.ingress, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
	if err != nil || st != http.StatusOK || body != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("answer %d %q %v", st, body, err)
	}
}

func TestFailingSinkGets500AndSlacksRetryJoinsTheSameMessage(t *testing.T) {
	r := newRig(t, nil)
	r.sink.failNext(1)
	ev := r.fake.Message("D1", "im", "U1", "remind me at 5")
	d := r.fake.Deliver(ctxT(t), r.ingress, ev)
	if !d.OK || len(d.Attempts) != 2 {
		t.Fatalf("delivery %+v, want a 500 then a 200", d)
	}
	if a := d.Attempts[0]; a.Status != http.StatusInternalServerError {
		t.Errorf("first attempt %+v, want 500", a)
	}
	if a := d.Attempts[1]; a.RetryNum != 1 || a.Reason != "http_error" || a.Status != http.StatusOK {
		t.Errorf("retry %+v, want retry 1 (http_error) answered 200", a)
	}
	got := r.sink.all()
	if len(got) != 2 || got[0].MessageID != got[1].MessageID || got[0].MessageID != "D1:"+ev.Inner["ts"].(string) {
		t.Fatalf("sink got %+v, want the same message twice", got)
	}
	if got[1].ChatType != channels.ChatDirect || got[1].Mentioned {
		t.Errorf("a DM: %+v", got[1])
	}
	if !strings.Contains(r.logs.Text(), "retry 1, http_error") {
		t.Errorf("the retry is not logged with its number:\n%s", r.logs.Text())
	}
	if v := r.status.View(); v.Received != 1 || v.LastError == "" {
		t.Errorf("status %+v, want 1 received and the sink's error", v)
	}
}

func TestMessageAndAppMentionOfOneMessageShareTheMessageID(t *testing.T) {
	r := newRig(t, nil)
	ctx := ctxT(t)
	msg := r.fake.Message("C7", "channel", "U1", "hey <@U0BOT|agentry> summarise", fakeslack.InThread("1700000000.000100"))
	mention := r.fake.MentionOf(msg)
	if msg.ID == mention.ID {
		t.Fatal("the fake gave both events one event_id")
	}
	for _, ev := range []fakeslack.Event{msg, mention} {
		if d := r.fake.Deliver(ctx, r.ingress, ev); !d.OK {
			t.Fatalf("delivery %+v", d)
		}
	}
	got := r.sink.all()
	if len(got) != 2 || got[0].MessageID != got[1].MessageID {
		t.Fatalf("sink got %+v, want one message id twice", got)
	}
	for _, m := range got {
		if m.Text != "hey summarise" {
			t.Errorf("text %q: the mention is not stripped", m.Text)
		}
		if !m.Mentioned || m.ChatType != channels.ChatGroup || m.ThreadID != "1700000000.000100" || m.ReplyTo != "1700000000.000100" {
			t.Errorf("mapped %+v", m)
		}
	}
}

func TestEditsDeletionsJoinsAndEmptyMessagesAreIgnoredButAnswered200(t *testing.T) {
	r := newRig(t, nil)
	ctx := ctxT(t)
	ignored := []fakeslack.Event{
		r.fake.Message("C1", "channel", "U1", "edited text", fakeslack.Subtype("message_changed")),
		r.fake.Message("C1", "channel", "U1", "", fakeslack.Subtype("message_deleted")),
		r.fake.Message("C1", "channel", "U1", "<@U1> has joined the channel", fakeslack.Subtype("channel_join")),
		r.fake.Message("C1", "channel", "U1", "   "),
		r.fake.Message("C1", "channel", "U1", "<@U0BOT>"),
	}
	for _, ev := range ignored {
		d := r.fake.Deliver(ctx, r.ingress, ev)
		if !d.OK || len(d.Attempts) != 1 {
			t.Errorf("ignored event %v: delivery %+v, want one 200", ev.Inner["subtype"], d)
		}
	}
	if got := r.sink.all(); len(got) != 0 {
		t.Fatalf("sink got %+v, want nothing", got)
	}
	if v := r.status.View(); v.Ignored != int64(len(ignored)) {
		t.Errorf("ignored %d, want %d", v.Ignored, len(ignored))
	}
	if strings.Contains(r.logs.Text(), "edited text") || strings.Contains(r.logs.Text(), "has joined") {
		t.Error("message text reached the log")
	}
}

func TestOwnAndOtherBotsMessagesAreMarked(t *testing.T) {
	r := newRig(t, nil)
	ctx := ctxT(t)
	echo := r.fake.EchoOf(fakeslack.Post{Channel: "C1", Text: "the answer", TS: "1700000001.000200"}, "channel")
	other := r.fake.Message("C1", "channel", "U9", "beep", fakeslack.BotID("B0OTHER"))
	legacy := r.fake.Message("C1", "channel", "", "legacy", fakeslack.Subtype("bot_message"), fakeslack.BotID("B0LEGACY"))
	for _, ev := range []fakeslack.Event{echo, other, legacy} {
		if d := r.fake.Deliver(ctx, r.ingress, ev); !d.OK {
			t.Fatalf("delivery %+v", d)
		}
	}
	got := r.sink.all()
	if len(got) != 3 {
		t.Fatalf("sink got %d, want 3", len(got))
	}
	if !got[0].FromSelf || !got[0].FromBot {
		t.Errorf("the bot's own echo: %+v", got[0])
	}
	if got[1].FromSelf || !got[1].FromBot || !got[2].FromBot || got[2].FromSelf || got[2].UserID != "B0LEGACY" {
		t.Errorf("other bots: %+v / %+v", got[1], got[2])
	}
}
