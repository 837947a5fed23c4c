package discord_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentryhq/agentry/dev/fakediscord"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/channels/channeltest"
	"github.com/agentryhq/agentry/internal/channels/discord"
)

const (
	token = "test-token-xyz"
	botID = "900000000000000001"
	guild = "700000000000000001"
	alice = "800000000000000001"
)

func newCursors() *memCursors { return &memCursors{} }

// sink records what it is handed.
type sink struct {
	mu   sync.Mutex
	got  []channels.Inbound
	fail int // refuse the next n messages
}

func (s *sink) take(_ context.Context, m channels.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return errors.New("temporal unavailable")
	}
	s.got = append(s.got, m)
	return nil
}

func (s *sink) all() []channels.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]channels.Inbound(nil), s.got...)
}

// waitFor polls until the sink holds a message with the id.
func (s *sink) waitFor(t *testing.T, id string) []channels.Inbound {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		got := s.all()
		for _, m := range got {
			if m.MessageID == id {
				return got
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("message %s never reached the sink; got %v", id, ids(s.all()))
	return nil
}

func ids(ms []channels.Inbound) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.MessageID
	}
	return out
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if f() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

type running struct {
	a      channels.Adapter
	sink   *sink
	status *channels.Status
	logs   *logs
	cancel context.CancelFunc
	done   chan error
}

func newAdapter(t *testing.T, fk *fakediscord.Server, tok string, cur channels.Cursors) (channels.Adapter, *sink, *channels.Status, *logs) {
	t.Helper()
	sk, st, lg := &sink{}, &channels.Status{}, &logs{}
	a, err := discord.New(channels.Deps{
		Settings: channels.Settings{ID: "dc", Type: channels.TypeDiscord, BotToken: tok, APIBaseURL: fk.APIBase()},
		Sink:     sk.take, Cursors: cur, HTTP: &http.Client{Timeout: 10 * time.Second}, Status: st, Logf: lg.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, sk, st, lg
}

// start runs Receive until the test ends and waits for the gateway
// session.
func start(t *testing.T, fk *fakediscord.Server, cur channels.Cursors) *running {
	t.Helper()
	a, sk, st, lg := newAdapter(t, fk, token, cur)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{a: a, sink: sk, status: st, logs: lg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Receive(ctx) }()
	t.Cleanup(r.stop)
	eventually(t, "connected", func() bool { return st.View().State == channels.StateConnected })
	return r
}

func (r *running) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

func startFake(t *testing.T) *fakediscord.Server {
	t.Helper()
	fk, err := fakediscord.Start(token, botID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fk.Close)
	return fk
}

func TestReceiveMapsMessagesInOrder(t *testing.T) {
	fk := startFake(t)
	r := start(t, fk, newCursors())
	if want := discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent; fk.Intents() != int(want) {
		t.Fatalf("identified with intents %d, want %d", fk.Intents(), want)
	}
	const chat, dm, thread = "600000000000000001", "600000000000000002", "600000000000000003"
	var posted []string
	for i := 0; i < 10; i++ {
		posted = append(posted, fk.Post(chat, guild, alice, fmt.Sprintf("msg %d", i)))
	}
	mention := fk.Post(chat, guild, alice, "  what is up?", fakediscord.MentionBot(), fakediscord.Username("alice"))
	nick := fk.Post(thread, guild, alice, "<@!"+botID+"> in a thread")
	direct := fk.Post(dm, "", alice, "hello bot")
	got := r.sink.waitFor(t, direct)
	if len(got) != 13 {
		t.Fatalf("sink got %d messages, want 13: %v", len(got), ids(got))
	}
	for i, id := range posted {
		m := got[i]
		if m.MessageID != id || m.Text != fmt.Sprintf("msg %d", i) || m.ChatID != chat || m.ChatType != channels.ChatGroup ||
			m.UserID != alice || m.Username != "user-"+alice || m.ReplyTo != id || m.Mentioned || m.FromSelf || m.FromBot ||
			m.ThreadID != "" || m.At.IsZero() {
			t.Fatalf("message %d mapped as %+v", i, m)
		}
	}
	if m := got[10]; m.MessageID != mention || !m.Mentioned || m.Text != "what is up?" || m.Username != "alice" {
		t.Fatalf("mention mapped as %+v", m)
	}
	if m := got[11]; m.MessageID != nick || !m.Mentioned || m.Text != "in a thread" || m.ChatID != thread {
		t.Fatalf("nickname mention in a thread mapped as %+v", m)
	}
	if m := got[12]; m.ChatType != channels.ChatDirect || m.ChatID != dm || m.Text != "hello bot" {
		t.Fatalf("direct message mapped as %+v", m)
	}
	v := r.status.View()
	if v.Received != 13 || v.Detail["bot_user"] != fk.BotName() {
		t.Fatalf("status %+v", v)
	}
	if strings.Contains(r.logs.Text(), token) {
		t.Fatal("the token was logged")
	}
	r.cancel()
	if err := <-r.done; err != nil || r.status.View().State != channels.StateStopped {
		t.Fatalf("Receive after ctx end: %v, state %s", err, r.status.View().State)
	}
	r.cancel = nil
}

func TestIgnoresEditsDeletesAndEmptyMessagesAndFlagsSelfAndBots(t *testing.T) {
	fk := startFake(t)
	r := start(t, fk, newCursors())
	const chat = "600000000000000010"
	first := fk.Post(chat, guild, alice, "first")
	r.sink.waitFor(t, first)
	fk.Edit(chat, first, "first, edited")
	fk.Delete(chat, first)
	fk.Post(chat, guild, alice, "", fakediscord.NoContent())
	other := fk.Post(chat, guild, "800000000000000099", "beep", fakediscord.AsBot())
	sent, err := r.a.Send(context.Background(), channels.Outbound{ChatID: chat, Text: "my own reply"})
	if err != nil {
		t.Fatal(err)
	}
	last := fk.Post(chat, guild, alice, "last")
	got := r.sink.waitFor(t, last)
	if len(got) != 4 {
		t.Fatalf("sink got %v, want first, the bot's, our echo, last", ids(got))
	}
	if got[1].MessageID != other || !got[1].FromBot || got[1].FromSelf {
		t.Fatalf("other bot's message mapped as %+v", got[1])
	}
	if got[2].MessageID != sent.PlatformID || !got[2].FromSelf {
		t.Fatalf("own echo mapped as %+v", got[2])
	}
	v := r.status.View()
	if v.Ignored != 3 || v.Received != 4 {
		t.Fatalf("status counts ignored=%d received=%d, want 3 and 4", v.Ignored, v.Received)
	}
	if l := r.logs.Text(); !strings.Contains(l, "ignored edited message") || !strings.Contains(l, "ignored deleted message") ||
		!strings.Contains(l, "ignored message without text") || strings.Contains(l, "first, edited") {
		t.Fatalf("log lines:\n%s", l)
	}
}

func TestResumeAfterDroppedConnectionDeliversMissedOnce(t *testing.T) {
	fk := startFake(t)
	r := start(t, fk, newCursors())
	const chat = "600000000000000020"
	var want []string
	for i := 0; i < 3; i++ {
		want = append(want, fk.Post(chat, guild, alice, fmt.Sprintf("before %d", i)))
	}
	r.sink.waitFor(t, want[2])
	fk.DropConnections()
	for i := 0; i < 5; i++ { // dispatched while the socket is down: replayed on resume
		want = append(want, fk.Post(chat, guild, alice, fmt.Sprintf("during %d", i)))
	}
	eventually(t, "resumed", func() bool { return fk.Resumes() == 1 })
	want = append(want, fk.Post(chat, guild, alice, "after"))
	got := r.sink.waitFor(t, want[len(want)-1])
	if fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Fatalf("sink got\n%v\nwant\n%v", ids(got), want)
	}
	if fk.Identifies() != 1 || fk.Resumes() != 1 {
		t.Fatalf("identifies=%d resumes=%d, want 1 and 1", fk.Identifies(), fk.Resumes())
	}
}

func TestCatchUpAfterRestartHandsExactlyTheMissedMessages(t *testing.T) {
	fk := startFake(t)
	cur := newCursors()
	const chatA, dm, unseen = "600000000000000030", "600000000000000031", "600000000000000032"
	r1 := start(t, fk, cur)
	a1 := fk.Post(chatA, guild, alice, "a1")
	d1 := fk.Post(dm, "", alice, "d1")
	r1.sink.waitFor(t, a1)
	r1.sink.waitFor(t, d1)
	r1.stop() // the gateway goes away

	var missedA []string
	for i := 0; i < 130; i++ { // more than one page of history
		missedA = append(missedA, fk.PostOffline(chatA, guild, alice, fmt.Sprintf("missed %d", i)))
	}
	d2 := fk.PostOffline(dm, "", alice, "d2")
	fk.PostOffline(unseen, guild, alice, "never seen chat")

	r2 := start(t, fk, cur) // a new process: same store, new session
	live := fk.Post(chatA, guild, alice, "live")
	// The history read may already hold "live" (it was posted while the
	// catch-up ran): per-chat order is promised, not across chats.
	r2.sink.waitFor(t, live)
	got := r2.sink.waitFor(t, d2)
	var gotA, gotDM []string
	for _, m := range got {
		switch m.ChatID {
		case chatA:
			gotA = append(gotA, m.MessageID)
		case dm:
			gotDM = append(gotDM, m.MessageID)
			if m.ChatType != channels.ChatDirect || m.Text != "d2" {
				t.Fatalf("caught-up direct message mapped as %+v", m)
			}
		default:
			t.Fatalf("message of a chat never seen was fetched: %+v", m)
		}
	}
	if want := append(missedA, live); fmt.Sprint(gotA) != fmt.Sprint(want) {
		t.Fatalf("chat A got %d messages %v\nwant %d %v", len(gotA), gotA, len(want), want)
	}
	if len(gotDM) != 1 || gotDM[0] != d2 {
		t.Fatalf("dm got %v, want [%s]", gotDM, d2)
	}
	if v, _ := cur.Cursor(context.Background(), "discord/dc/chat/"+chatA); v != live {
		t.Fatalf("stored position %q, want %q", v, live)
	}
	if fk.Identifies() != 2 {
		t.Fatalf("identifies %d, want 2", fk.Identifies())
	}
}

func TestRefusedResumeIdentifiesAgainAndCatchesUp(t *testing.T) {
	fk := startFake(t)
	r := start(t, fk, newCursors())
	const chat = "600000000000000035"
	want := []string{fk.Post(chat, guild, alice, "before")}
	r.sink.waitFor(t, want[0])
	fk.InvalidateSessions()
	fk.DropConnections()
	// No session exists: these are dispatched to nobody, only the
	// history has them.
	want = append(want, fk.Post(chat, guild, alice, "lost 1"), fk.Post(chat, guild, alice, "lost 2"))
	eventually(t, "identified again", func() bool { return fk.Identifies() == 2 && fk.Connected() == 1 })
	want = append(want, fk.Post(chat, guild, alice, "after"))
	got := r.sink.waitFor(t, want[3])
	if fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Fatalf("sink got %v, want %v", ids(got), want)
	}
	if fk.Resumes() != 0 {
		t.Fatalf("resumes %d", fk.Resumes())
	}
}

func TestSinkFailureIsRetriedInOrder(t *testing.T) {
	fk := startFake(t)
	cur := newCursors()
	r := start(t, fk, cur)
	r.sink.mu.Lock()
	r.sink.fail = 2
	r.sink.mu.Unlock()
	const chat = "600000000000000040"
	m1 := fk.Post(chat, guild, alice, "one")
	m2 := fk.Post(chat, guild, alice, "two")
	got := r.sink.waitFor(t, m2)
	if fmt.Sprint(ids(got)) != fmt.Sprint([]string{m1, m2}) {
		t.Fatalf("got %v", ids(got))
	}
	if r.status.View().LastError == "" {
		t.Fatal("the sink failure is not in the status")
	}
}

func TestSendRepliesWithReference(t *testing.T) {
	fk := startFake(t)
	a, _, _, _ := newAdapter(t, fk, token, nil)
	const chat, thread = "600000000000000050", "600000000000000051"
	orig := fk.Post(chat, guild, alice, "question")
	fk.AddChannel(thread, guild)
	s1, err := a.Send(context.Background(), channels.Outbound{ChatID: chat, ReplyTo: orig, Text: "answer @everyone"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := a.Send(context.Background(), channels.Outbound{ChatID: chat, ThreadID: thread, Text: "in thread"})
	if err != nil {
		t.Fatal(err)
	}
	sent := fk.Sent()
	if len(sent) != 2 {
		t.Fatalf("sent %+v", sent)
	}
	if sent[0].ID != s1.PlatformID || sent[0].ChannelID != chat || sent[0].ReplyTo != orig || sent[0].Content != "answer @everyone" ||
		sent[0].FailIfNotExists == nil || *sent[0].FailIfNotExists {
		t.Fatalf("reply sent as %+v (platform id %s)", sent[0], s1.PlatformID)
	}
	if sent[1].ID != s2.PlatformID || sent[1].ChannelID != thread || sent[1].ReplyTo != "" {
		t.Fatalf("thread message sent as %+v", sent[1])
	}
	_, err = a.Send(context.Background(), channels.Outbound{ChatID: "600000000000000999", Text: "x"})
	var ref *channels.Refused
	if !errors.As(err, &ref) || ref.Status != http.StatusNotFound {
		t.Fatalf("send to an unknown channel: %v", err)
	}
	if l := a.Limits(); l.MaxText != 2000 || l.PerChat != time.Second || l.PerBotPerSecond != 50 {
		t.Fatalf("limits %+v", l)
	}
}

func TestSendRateLimitedReturnsAtOnce(t *testing.T) {
	fk := startFake(t)
	a, _, _, _ := newAdapter(t, fk, token, nil)
	const chat = "600000000000000060"
	fk.AddChannel(chat, guild)
	fk.FailSends(1, 90*time.Second+500*time.Millisecond)
	// discordgo sleeping out the 429 (or its bucket's reset) would
	// overrun this deadline by far.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := a.Send(ctx, channels.Outbound{ChatID: chat, Text: "hi"})
	var rl *channels.RateLimited
	if !errors.As(err, &rl) || rl.RetryAfter != 90*time.Second+500*time.Millisecond || rl.Global {
		t.Fatalf("send under 429: %v (%+v)", err, rl)
	}
	if ctx.Err() != nil {
		t.Fatal("Send slept on the rate limit")
	}
	if len(fk.Sent()) != 0 {
		t.Fatal("a rate-limited message was recorded as sent")
	}
	s, err := a.Send(ctx, channels.Outbound{ChatID: chat, Text: "again"})
	if err != nil || s.PlatformID == "" || ctx.Err() != nil {
		t.Fatalf("the next send: %v %+v", err, s)
	}
	// discordgo drops the body's "global"; the adapter reads it.
	fk.FailSendsGlobal(1, 250*time.Millisecond)
	_, err = a.Send(ctx, channels.Outbound{ChatID: chat, Text: "global"})
	if !errors.As(err, &rl) || !rl.Global || rl.RetryAfter != 250*time.Millisecond {
		t.Fatalf("send under a global 429: %v (%+v)", err, rl)
	}
}

func TestRefusedTokenStopsWithUnauthorized(t *testing.T) {
	fk := startFake(t)
	a, _, st, lg := newAdapter(t, fk, "wrong-token", newCursors())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := a.Receive(ctx)
	var un *channels.Unauthorized
	if !errors.As(err, &un) || ctx.Err() != nil {
		t.Fatalf("Receive with a refused token: %v", err)
	}
	if v := st.View(); v.State != channels.StateUnauthorized || v.LastError == "" {
		t.Fatalf("status %+v", v)
	}
	if _, err := a.Send(ctx, channels.Outbound{ChatID: "1", Text: "x"}); !errors.As(err, &un) {
		t.Fatalf("send with a refused token: %v", err)
	}
	if strings.Contains(lg.Text(), "wrong-token") {
		t.Fatal("the token was logged")
	}
}

func TestRevokedTokenAtResumeStopsWithUnauthorized(t *testing.T) {
	fk := startFake(t)
	r := start(t, fk, newCursors())
	fk.SetToken("rotated")
	fk.DropConnections() // the resume meets close code 4004
	select {
	case err := <-r.done:
		r.cancel = nil
		var un *channels.Unauthorized
		if !errors.As(err, &un) || !strings.Contains(err.Error(), "4004") {
			t.Fatalf("Receive returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Receive kept running with a revoked token")
	}
	if v := r.status.View(); v.State != channels.StateUnauthorized {
		t.Fatalf("status %+v", v)
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	if _, err := discord.New(channels.Deps{Settings: channels.Settings{ID: "dc"}}); err == nil {
		t.Fatal("no token accepted")
	}
	if _, err := discord.New(channels.Deps{Settings: channels.Settings{ID: "dc", BotToken: "t", APIBaseURL: "ftp://x"}}); err == nil {
		t.Fatal("ftp api_base_url accepted")
	}
}

// Shared with the other adapters' tests.
type memCursors = channeltest.Cursors
type logs = channeltest.Logs
