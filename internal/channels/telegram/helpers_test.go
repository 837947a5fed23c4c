package telegram

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/mymmrac/telego"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/channels/channeltest"
)

// recorder is a sink that records accepted messages; fail decides per
// call whether to refuse one (nil: accept all).
type recorder struct {
	mu       sync.Mutex
	accepted []channels.Inbound
	calls    []string // MessageID of every call, refused ones too
	fail     func(m channels.Inbound, attempt int) error
}

func (r *recorder) sink(_ context.Context, m channels.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	attempt := 0
	for _, id := range r.calls {
		if id == m.MessageID {
			attempt++
		}
	}
	r.calls = append(r.calls, m.MessageID)
	if r.fail != nil {
		if err := r.fail(m, attempt); err != nil {
			return err
		}
	}
	r.accepted = append(r.accepted, m)
	return nil
}

func (r *recorder) got() []channels.Inbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]channels.Inbound(nil), r.accepted...)
}

func (r *recorder) callIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

type env struct {
	t       *testing.T
	fake    *faketelegram.Server
	a       *Adapter
	deps    channels.Deps
	cursors *memCursors
	rec     *recorder
	logs    *logLines
}

// newEnv starts a fake Telegram and an adapter on it; edit adjusts the
// settings before New.
func newEnv(t *testing.T, edit func(*channels.Settings)) *env {
	t.Helper()
	fake, err := faketelegram.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	e := &env{t: t, fake: fake, cursors: &memCursors{}, rec: &recorder{}, logs: &logLines{}}
	s := channels.Settings{ID: "tg", Type: channels.TypeTelegram, Enabled: true, BotToken: faketelegram.DefaultToken, APIBaseURL: fake.URL()}
	if edit != nil {
		edit(&s)
	}
	e.deps = channels.Deps{Settings: s, Sink: e.rec.sink, Cursors: e.cursors, HTTP: &http.Client{Timeout: 40 * time.Second},
		Status: &channels.Status{}, Logf: e.logs.Logf}
	ad, err := New(e.deps)
	if err != nil {
		t.Fatal(err)
	}
	e.a = ad.(*Adapter)
	e.a.backoffMin, e.a.backoffMax = 10*time.Millisecond, 50*time.Millisecond
	return e
}

// receive runs Receive until the test ends; the returned channel gets
// its result (and is closed).
func (e *env) receive() (<-chan error, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.a.Receive(ctx); close(done) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			e.t.Error("Receive did not return after its context ended")
		}
	})
	return done, cancel
}

func (e *env) offset() string {
	v, _ := e.cursors.Cursor(context.Background(), OffsetKey("tg"))
	return v
}

// waitFor waits (up to 15 s) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var errRefusedBySink = errors.New("temporal is unavailable")

// mentionEntities are the "mention" entities Telegram would send for
// text (UTF-16 offsets).
func mentionEntities(t *testing.T, text string) []telego.MessageEntity {
	t.Helper()
	var out []telego.MessageEntity
	u := utf16.Encode([]rune(text))
	for i := 0; i < len(u); i++ {
		if u[i] != '@' {
			continue
		}
		j := i + 1
		for j < len(u) && u[j] != ' ' {
			j++
		}
		out = append(out, telego.MessageEntity{Type: "mention", Offset: i, Length: j - i})
		i = j
	}
	return out
}

// idOf is the MessageID of an update of the fake's default bot.
func idOf(update int64) string {
	bot, _, _ := strings.Cut(faketelegram.DefaultToken, ":")
	return bot + "-" + strconv.FormatInt(update, 10)
}

// updateOf is the update id in a MessageID.
func updateOf(id string) int64 {
	_, n, _ := strings.Cut(id, "-")
	v, _ := strconv.ParseInt(n, 10, 64)
	return v
}

// Shared with the other adapters' tests.
type memCursors = channeltest.Cursors
type logLines = channeltest.Logs
