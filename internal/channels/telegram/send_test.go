package telegram

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/internal/channels"
)

func TestSendReplyInAThread(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.AddMessage(-300, "supergroup", 7, "question", faketelegram.Thread(42))
	e.receive()
	waitFor(t, "the question", func() bool { return len(e.rec.got()) == 1 })
	in := e.rec.got()[0]
	out := channels.Outbound{ChatID: in.ChatID, ThreadID: in.ThreadID, ReplyTo: in.ReplyTo, Text: "answer <b>not html</b>", Group: true}
	sent, err := e.a.Send(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	msgs := e.fake.SentTo(-300)
	if len(msgs) != 1 {
		t.Fatalf("sent %+v", msgs)
	}
	m := msgs[0]
	if strconv.FormatInt(m.MessageID, 10) != sent.PlatformID || m.ThreadID != 42 || strconv.FormatInt(m.ReplyTo, 10) != in.ReplyTo ||
		!m.AllowWithoutReply || m.Text != out.Text {
		t.Fatalf("sent %+v (platform id %s), want thread 42, reply to %s, allow without reply", m, sent.PlatformID, in.ReplyTo)
	}
	// The original is deleted meanwhile: the reply still goes out.
	orig, _ := strconv.ParseInt(in.ReplyTo, 10, 64)
	e.fake.DeleteMessage(-300, orig)
	if _, err := e.a.Send(context.Background(), out); err != nil {
		t.Fatalf("reply to a deleted message: %v", err)
	}
	if msgs := e.fake.SentTo(-300); len(msgs) != 2 || msgs[1].ReplyTo != 0 {
		t.Fatalf("sent %+v", msgs)
	}
}

func TestSendErrorsAreClassified(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.AddMessage(11, "private", 11, "hi")
	e.fake.Block(12)
	ctx := context.Background()
	var rf *channels.Refused
	if _, err := e.a.Send(ctx, channels.Outbound{ChatID: "999", Text: "x"}); !errors.As(err, &rf) || rf.Status != http.StatusBadRequest {
		t.Fatalf("unknown chat: %v, want Refused 400", err)
	}
	if _, err := e.a.Send(ctx, channels.Outbound{ChatID: "12", Text: "x"}); !errors.As(err, &rf) || rf.Status != http.StatusForbidden {
		t.Fatalf("blocked: %v, want Refused 403", err)
	}
	if _, err := e.a.Send(ctx, channels.Outbound{ChatID: "not a chat", Text: "x"}); !errors.As(err, &rf) {
		t.Fatalf("bad chat id: %v, want Refused", err)
	}
	e.fake.FailSends(1, 7*time.Second)
	var rl *channels.RateLimited
	if _, err := e.a.Send(ctx, channels.Outbound{ChatID: "11", Text: "x"}); !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("429: %v, want RateLimited 7s", err)
	}
	if sent, err := e.a.Send(ctx, channels.Outbound{ChatID: "11", Text: "x"}); err != nil || sent.PlatformID != "2" {
		t.Fatalf("after the 429: %+v %v", sent, err)
	}
	if n := e.fake.Calls("sendMessage"); n != 5-1 { // the bad chat id never reached Telegram
		t.Fatalf("sendMessage called %d times, want 4 (no retries inside the library)", n)
	}
}

func TestLimits(t *testing.T) {
	e := newEnv(t, nil)
	l := e.a.Limits()
	if l.MaxText != 4096 || l.PerChat != time.Second || l.GroupPerMinute != 20 || l.PerBotPerSecond != 30 {
		t.Fatalf("limits %+v", l)
	}
}
