package channels

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/models"
)

// echoAdapter is a platform whose receiver feeds queued messages to the
// sink and whose sends are recorded.
type echoAdapter struct {
	deps  Deps
	inbox chan Inbound
	mu    sync.Mutex
	sent  []Outbound
}

func (a *echoAdapter) Receive(ctx context.Context) error {
	a.deps.Status.SetState(StateConnected)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-a.inbox:
			if err := a.deps.Sink(ctx, m); err != nil {
				return err
			}
		}
	}
}

func (a *echoAdapter) Send(_ context.Context, m Outbound) (Sent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = append(a.sent, m)
	return Sent{PlatformID: "p1"}, nil
}

func (a *echoAdapter) Limits() Limits { return Limits{MaxText: 100} }

func (a *echoAdapter) Ingress(ctx context.Context, r IngressRequest) IngressResponse {
	if r.Header.Get("X-Secret") != a.deps.Settings.SecretToken {
		return IngressResponse{Status: 401}
	}
	if err := a.deps.Sink(ctx, Inbound{MessageID: "w1", ChatID: "c", ChatType: ChatDirect, Text: string(r.Body)}); err != nil {
		return IngressResponse{Status: 500}
	}
	return IngressResponse{Status: 200}
}

type queued struct {
	mu   sync.Mutex
	msgs []Inbound
	fail error
}

func (q *queued) Enqueue(_ context.Context, channelID, agentID string, m Inbound) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail != nil {
		return q.fail
	}
	m.Username = agentID // the test reads which agent got it here
	q.msgs = append(q.msgs, m)
	return nil
}

func (q *queued) list() []Inbound {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Inbound(nil), q.msgs...)
}

func newService(t *testing.T, yaml string) (*Service, *queued, *echoAdapter) {
	t.Helper()
	st, err := models.Open(context.Background(), models.Options{DSN: filepath.Join(t.TempDir(), "app.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.Defaults()
	if err := config.Parse([]byte(yaml), "c.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	q := &queued{}
	ad := &echoAdapter{inbox: make(chan Inbound, 10)}
	s := &Service{Config: &cfg, Store: st, Secrets: secrets.New(st, t.TempDir()), Enqueue: q,
		Factories: map[string]Factory{TypeTelegram: func(d Deps) (Adapter, error) {
			ad.deps = d
			return ad, nil
		}}}
	return s, q, ad
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSettingsPatchedThroughTheAPIApplyOverTheFileAndSealCredentials(t *testing.T) {
	s, _, _ := newService(t, "channels:\n  telegram: {agent: helper, bot_token: from-file, trigger: bot}\n")
	ctx := context.Background()
	v, err := s.Patch(ctx, "telegram", map[string]any{"enabled": true, "bot_token": "from-api", "allowed_users": "1, 2", "trigger": nil}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if v.Settings["bot_token"] != config.Redacted || strings.Contains(v.Settings["bot_token"].(string), "from") {
		t.Fatalf("the view shows the token: %v", v.Settings)
	}
	set, over, err := s.Settings(ctx, "telegram")
	if err != nil {
		t.Fatal(err)
	}
	if !set.Enabled || set.BotToken != "from-api" || set.Agent != "helper" || set.Trigger != "" || strings.Join(set.AllowedUsers, ",") != "1,2" {
		t.Fatalf("effective settings: %+v", set)
	}
	if strings.Join(over, ",") != "allowed_users,bot_token,enabled,trigger" {
		t.Fatalf("overridden: %v", over)
	}
	row, _ := s.Store.GetChannelSetting(ctx, "telegram")
	if strings.Contains(row.Settings, "from-api") || row.SecretKeys != "bot_token" {
		t.Fatalf("the credential is in the settings row: %+v", row)
	}
	// Written back as read, the token stays; cleared, it is gone (not the file's).
	if _, err := s.Patch(ctx, "telegram", map[string]any{"bot_token": config.Redacted}, "admin"); err != nil {
		t.Fatal(err)
	}
	if set, _, _ := s.Settings(ctx, "telegram"); set.BotToken != "from-api" {
		t.Fatalf("redacted write-back changed the token to %q", set.BotToken)
	}
	if _, err := s.Patch(ctx, "telegram", map[string]any{"bot_token": ""}, "admin"); err != nil {
		t.Fatal(err)
	}
	if set, _, _ := s.Settings(ctx, "telegram"); set.BotToken != "" {
		t.Fatalf("a cleared token reads %q", set.BotToken)
	}
}

func TestBadPatchesChangeNothing(t *testing.T) {
	s, _, _ := newService(t, "")
	ctx := context.Background()
	for _, bad := range []map[string]any{
		{"enabled": "yes"},
		{"mode": "push"},
		{"api_base_url": "ftp://x"},
		{"colour": "blue"},
		{"allowed_chats": 5},
		{"trigger": "x", "enabled": 1},
		{},
	} {
		_, err := s.Patch(ctx, "telegram", bad, "admin")
		var inv *fault.Invalid
		if !errors.As(err, &inv) {
			t.Errorf("%v: %v, want a 400", bad, err)
		}
	}
	if row, _ := s.Store.GetChannelSetting(ctx, "telegram"); row.Settings != "{}" {
		t.Fatalf("a refused patch stored %s", row.Settings)
	}
	if _, err := s.Patch(ctx, "irc", map[string]any{"enabled": true}, "admin"); !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("unknown channel: %v", err)
	}
}

func TestReceivedMessagesPassTheRulesToTheQueueAndCallbacksReachTheAdapter(t *testing.T) {
	s, q, ad := newService(t, "channels:\n  telegram: {enabled: true, agent: helper, secret_token: tok}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx)
	defer s.Stop()
	ad.inbox <- Inbound{MessageID: "1", ChatID: "c", ChatType: ChatDirect, Text: "hello"}
	ad.inbox <- Inbound{MessageID: "2", ChatID: "g", ChatType: ChatGroup, Text: "not for the bot"}
	ad.inbox <- Inbound{MessageID: "3", ChatID: "c", ChatType: ChatDirect, Text: strings.Repeat("x", MaxInboundText+10)}
	waitUntil(t, "two messages queued", func() bool { return len(q.list()) == 2 })
	if got := q.list(); got[0].MessageID != "1" || got[1].MessageID != "3" || len(got[1].Text) != MaxInboundText {
		t.Fatalf("queued: %s, %s (%d bytes)", got[0].MessageID, got[1].MessageID, len(got[1].Text))
	}
	if v, _ := s.View(ctx, "telegram"); v.Adapter.State != StateConnected || v.Adapter.Ignored != 1 {
		t.Fatalf("status: %+v", v.Adapter)
	}
	res, err := s.Ingress(ctx, "telegram", IngressRequest{Header: map[string][]string{"X-Secret": {"wrong"}}, Body: []byte("forged")})
	if err != nil || res.Status != 401 || len(q.list()) != 2 {
		t.Fatalf("forged callback: %+v %v, %d queued", res, err, len(q.list()))
	}
	if _, err := s.Ingress(ctx, "slack", IngressRequest{}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("a disabled channel's callback: %v", err)
	}
	if _, err := s.Ingress(ctx, "irc", IngressRequest{}); !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("an unknown channel's callback: %v", err)
	}
	// Temporal down: the callback is not acknowledged (the platform retries).
	q.fail = errors.New("temporal unavailable")
	res, _ = s.Ingress(ctx, "telegram", IngressRequest{Header: map[string][]string{"X-Secret": {"tok"}}, Body: []byte("hi")})
	if res.Status != 500 {
		t.Fatalf("callback while the queue is down: %+v", res)
	}
	// Disabled through the API: the receiver stops.
	if _, err := s.Patch(ctx, "telegram", map[string]any{"enabled": false}, "admin"); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.View(ctx, "telegram"); v.Adapter.State != StateStopped {
		t.Fatalf("after disable: %s", v.Adapter.State)
	}
}

func TestSendsAreChecked(t *testing.T) {
	s, _, ad := newService(t, "channels:\n  telegram: {enabled: true, agent: helper}\n")
	ctx := context.Background()
	if err := s.CheckChat(ctx, "telegram", ""); !errors.Is(err, ErrNoChat) {
		t.Fatalf("no chat: %v", err)
	}
	if err := s.CheckChat(ctx, "slack", "C1"); err == nil {
		t.Fatal("a disabled channel took a message")
	}
	if _, err := s.Send(ctx, "telegram", Outbound{ChatID: "c", Text: "hi"}); err != nil || len(ad.sent) != 1 {
		t.Fatalf("send from a process that does not receive: %v, %d sent", err, len(ad.sent))
	}
}

type agentList []*agentdef.Definition

func (l agentList) List() []*agentdef.Definition { return l }

func TestAChannelWithoutAnAgentSettingIsAnsweredByTheAgentThatListsIt(t *testing.T) {
	s, q, ad := newService(t, "channels:\n  telegram: {enabled: true}\n")
	s.Agents = agentList{{ID: "other", Channels: []string{"slack"}}, {ID: "tg-agent", Channels: []string{"telegram"}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx)
	defer s.Stop()
	ad.inbox <- Inbound{MessageID: "1", ChatID: "c", ChatType: ChatDirect, Text: "hello"}
	waitUntil(t, "the message queued", func() bool { return len(q.list()) == 1 })
	if got := q.list()[0].Username; got != "tg-agent" {
		t.Fatalf("answered by %q", got)
	}
	// Two agents list it: ambiguous, not answered, the status says why.
	s.Agents = agentList{{ID: "a", Channels: []string{"telegram"}}, {ID: "b", Channels: []string{"telegram"}}}
	ad.inbox <- Inbound{MessageID: "2", ChatID: "c", ChatType: ChatDirect, Text: "hello"}
	waitUntil(t, "the status to say why", func() bool {
		v, _ := s.View(ctx, "telegram")
		return strings.Contains(v.Adapter.LastError, "a, b all list channel telegram")
	})
	if len(q.list()) != 1 {
		t.Fatal("an ambiguous channel answered")
	}
}

// countingAdapter counts the receivers running at once.
type countingAdapter struct{ running *atomic.Int32 }

func (a countingAdapter) Receive(ctx context.Context) error {
	a.running.Add(1)
	defer a.running.Add(-1)
	<-ctx.Done()
	return ctx.Err()
}
func (countingAdapter) Send(context.Context, Outbound) (Sent, error) { return Sent{}, nil }
func (countingAdapter) Limits() Limits                               { return Limits{} }

func TestConcurrentSettingsChangesLeaveOneReceiver(t *testing.T) {
	s, _, _ := newService(t, "channels:\n  telegram: {enabled: true, agent: helper}\n")
	var running atomic.Int32
	s.Factories[TypeTelegram] = func(Deps) (Adapter, error) { return countingAdapter{&running}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Start(ctx)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Patch(ctx, "telegram", map[string]any{"trigger": fmt.Sprint("t", i)}, "admin"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitUntil(t, "one receiver", func() bool { return running.Load() == 1 })
	time.Sleep(50 * time.Millisecond)
	if n := running.Load(); n != 1 {
		t.Fatalf("%d receivers of one bot after concurrent changes", n)
	}
	s.Stop()
	waitUntil(t, "no receiver", func() bool { return running.Load() == 0 })
}
