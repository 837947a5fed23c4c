package telegram

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mymmrac/telego"
	ta "github.com/mymmrac/telego/telegoapi"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/internal/channels"
)

func TestPollingDeliversInOrderAndStoresOffsetOnlyAfterSink(t *testing.T) {
	e := newEnv(t, nil)
	// The sink checks, while it holds a message, that its offset was not
	// stored (nor confirmed to Telegram) yet.
	e.rec.fail = func(m channels.Inbound, _ int) error {
		id := int(updateOf(m.MessageID))
		if stored, _ := strconv.Atoi(e.offset()); stored > id {
			t.Errorf("offset %d stored before update %d was accepted", stored, id)
		}
		if c := e.fake.ConfirmedOffset(); c > int64(id) {
			t.Errorf("offset %d confirmed before update %d was accepted", c, id)
		}
		return nil
	}
	var ids []int64
	for i, text := range []string{"one", "two", "three"} {
		ids = append(ids, e.fake.AddMessage(500, "private", 7, text, faketelegram.Username("ann")))
		_ = i
	}
	e.receive()
	waitFor(t, "three messages", func() bool { return len(e.rec.got()) == 3 })
	got := e.rec.got()
	for i, want := range []string{"one", "two", "three"} {
		m := got[i]
		if m.Text != want || m.MessageID != idOf(ids[i]) {
			t.Fatalf("message %d = %+v, want text %q id %d", i, m, want, ids[i])
		}
		if m.ChatID != "500" || m.ChatType != channels.ChatDirect || m.UserID != "7" || m.Username != "ann" ||
			m.ReplyTo != strconv.Itoa(i+1) || m.At.IsZero() || m.Mentioned || m.FromSelf || m.FromBot {
			t.Fatalf("message %d mapped wrong: %+v", i, m)
		}
	}
	last := ids[2] + 1
	waitFor(t, "the offset confirmed", func() bool { return e.fake.ConfirmedOffset() == last })
	if e.offset() != strconv.FormatInt(last, 10) {
		t.Fatalf("stored offset %q, want %d", e.offset(), last)
	}
	if e.fake.Calls("deleteWebhook") < 1 {
		t.Fatal("polling did not delete the webhook first")
	}
	v := e.deps.Status.View()
	if v.State != channels.StateConnected || v.Detail["username"] != e.fake.Username() || v.Received != 3 {
		t.Fatalf("status %+v", v)
	}
	waitFor(t, "the offset in the status", func() bool { return e.deps.Status.View().Detail["offset"] == strconv.FormatInt(last, 10) })
}

func TestPollingResumesFromTheStoredOffset(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.AddMessage(500, "private", 7, "answered before the restart")
	second := e.fake.AddMessage(500, "private", 7, "not yet")
	e.cursors.SetCursor(context.Background(), OffsetKey("tg"), strconv.FormatInt(second, 10))
	e.receive()
	waitFor(t, "the second message", func() bool { return len(e.rec.got()) >= 1 })
	waitFor(t, "the offset confirmed", func() bool { return e.fake.ConfirmedOffset() == second+1 })
	if ids := e.rec.callIDs(); len(ids) != 1 || ids[0] != idOf(second) {
		t.Fatalf("sink calls %v, want only %d", ids, second)
	}
}

func TestFailingSinkGetsTheSameUpdatesAgainNoneSkipped(t *testing.T) {
	e := newEnv(t, nil)
	a := e.fake.AddMessage(1, "private", 7, "a")
	b := e.fake.AddMessage(1, "private", 7, "b")
	c := e.fake.AddMessage(2, "private", 8, "c")
	bID := idOf(b)
	e.rec.fail = func(m channels.Inbound, attempt int) error {
		if m.MessageID == bID && attempt < 2 {
			// While b is refused, Telegram must never have been told to
			// drop it.
			if off := e.fake.ConfirmedOffset(); off > b {
				t.Errorf("offset %d confirmed past the unaccepted update %d", off, b)
			}
			return errRefusedBySink
		}
		return nil
	}
	e.receive()
	waitFor(t, "all three accepted", func() bool { return len(e.rec.got()) == 3 })
	var order []string
	for _, m := range e.rec.got() {
		order = append(order, m.Text)
	}
	if strings.Join(order, ",") != "a,b,c" {
		t.Fatalf("accepted %v, want a,b,c", order)
	}
	want := []string{idOf(a), bID, bID, bID, idOf(c)}
	if got := e.rec.callIDs(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("sink calls %v, want %v (b refused twice, nothing skipped or repeated)", got, want)
	}
	waitFor(t, "offset past c", func() bool { return e.fake.ConfirmedOffset() == c+1 })
	if v := e.deps.Status.View(); !strings.Contains(v.LastError, "temporal is unavailable") {
		t.Fatalf("status last error %q", v.LastError)
	}
}

func TestGetUpdates429StormPollingContinues(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailGetUpdates(2, time.Second)
	id := e.fake.AddMessage(3, "private", 9, "after the storm")
	e.receive()
	waitFor(t, "the message after the 429s", func() bool { return len(e.rec.got()) == 1 })
	if e.rec.got()[0].MessageID != idOf(id) {
		t.Fatalf("got %+v", e.rec.got())
	}
	if n := e.fake.Calls("getUpdates"); n < 3 {
		t.Fatalf("getUpdates called %d times, want the 2 refused and more", n)
	}
	v := e.deps.Status.View()
	if !strings.Contains(v.LastError, "retry after 1s") || v.State != channels.StateConnected {
		t.Fatalf("status %+v", v)
	}
	if !strings.Contains(e.logs.Text(), "rate-limited, waiting 1s") {
		t.Fatalf("logs: %s", e.logs.Text())
	}
	// Still polling: a later message arrives too.
	e.fake.AddMessage(3, "private", 9, "later")
	waitFor(t, "a later message", func() bool { return len(e.rec.got()) == 2 })
}

func TestSend429StormPollingContinues(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.AddMessage(4, "private", 9, "hi")
	e.receive()
	waitFor(t, "the first message", func() bool { return len(e.rec.got()) == 1 })
	e.fake.FailSends(2, 3*time.Second)
	for i := 0; i < 2; i++ {
		_, err := e.a.Send(context.Background(), channels.Outbound{ChatID: "4", Text: "answer"})
		var rl *channels.RateLimited
		if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
			t.Fatalf("send %d: %v, want RateLimited retry after 3s", i, err)
		}
	}
	sent, err := e.a.Send(context.Background(), channels.Outbound{ChatID: "4", Text: "answer"})
	if err != nil || sent.PlatformID == "" {
		t.Fatalf("send after the storm: %+v %v", sent, err)
	}
	if n := len(e.fake.SentTo(4)); n != 1 {
		t.Fatalf("%d messages reached the chat, want 1 (429s send nothing)", n)
	}
	e.fake.AddMessage(4, "private", 9, "still there?")
	waitFor(t, "a message after the send storm", func() bool { return len(e.rec.got()) == 2 })
}

func TestRefusedTokenStopsReceiveAsUnauthorized(t *testing.T) {
	e := newEnv(t, func(s *channels.Settings) { s.BotToken = "987654321:AAUnknownTokenXXXXXXXXXXXXXXXXXXXXX" })
	done, _ := e.receive()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Receive kept running with a refused token")
	}
	var unauth *channels.Unauthorized
	if !errors.As(err, &unauth) {
		t.Fatalf("Receive returned %v, want Unauthorized", err)
	}
	v := e.deps.Status.View()
	if v.State != channels.StateUnauthorized || !strings.Contains(v.LastError, "401") {
		t.Fatalf("status %+v", v)
	}
	if strings.Contains(v.LastError+e.logs.Text(), "AAUnknownToken") {
		t.Fatal("the token leaked into the status or the log")
	}
	if _, err := e.a.Send(context.Background(), channels.Outbound{ChatID: "1", Text: "x"}); !errors.As(err, &unauth) {
		t.Fatalf("Send with a refused token: %v, want Unauthorized", err)
	}
}

func TestNetworkErrorsAreScrubbedAndRetried(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Close() // nothing listens on the API's address any more
	e.receive()
	waitFor(t, "a recorded error", func() bool { return e.deps.Status.View().LastError != "" })
	waitFor(t, "several attempts", func() bool { return strings.Count(e.logs.Text(), "retrying in") >= 3 })
	v := e.deps.Status.View()
	_, sendErr := e.a.Send(context.Background(), channels.Outbound{ChatID: "1", Text: "x"})
	secret := strings.SplitN(faketelegram.DefaultToken, ":", 2)[1]
	for _, s := range []string{v.LastError, e.logs.Text(), sendErr.Error()} {
		if strings.Contains(s, secret) {
			t.Fatalf("the token leaked: %s", s)
		}
	}
	if !strings.Contains(sendErr.Error(), "<bot_token>") {
		t.Fatalf("send error %q: want the URL with the token scrubbed", sendErr)
	}
	var rl *channels.RateLimited
	var rf *channels.Refused
	if errors.As(sendErr, &rl) || errors.As(sendErr, &rf) {
		t.Fatalf("a network error must stay retryable, got %T", sendErr)
	}
	if v.State != channels.StateConnecting {
		t.Fatalf("state %q, want connecting while Telegram is unreachable", v.State)
	}
}

func TestWebhookSetWhilePollingIsDeletedAndPollingGoesOn(t *testing.T) {
	e := newEnv(t, nil)
	e.receive()
	waitFor(t, "polling", func() bool { return e.fake.Calls("getUpdates") > 0 })
	// Someone sets a webhook (to an address where nothing listens):
	// getUpdates answers 409 until the poller deletes it again.
	other, err := telego.NewBot(faketelegram.DefaultToken, telego.WithAPIServer(e.fake.URL()), telego.WithDiscardLogger(),
		telego.WithAPICaller(ta.HTTPCaller{Client: http.DefaultClient}))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetWebhook(context.Background(), &telego.SetWebhookParams{URL: "http://127.0.0.1:1/hook"}); err != nil {
		t.Fatal(err)
	}
	id := e.fake.AddMessage(6, "private", 6, "still polling")
	waitFor(t, "the message by polling", func() bool { return len(e.rec.got()) == 1 })
	if e.rec.got()[0].MessageID != idOf(id) || e.fake.Webhook().URL != "" {
		t.Fatalf("got %+v, webhook %+v", e.rec.got(), e.fake.Webhook())
	}
	if !strings.Contains(e.deps.Status.View().LastError, "409") {
		t.Fatalf("last error %q, want the 409", e.deps.Status.View().LastError)
	}
}
