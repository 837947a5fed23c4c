package slack_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeslack"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/channels/channeltest"
	slackch "github.com/agentryhq/agentry/internal/channels/slack"
)

const (
	botToken = "xoxb-test-bot-token"
	appToken = "xapp-test-app-token"
	secret   = "test-signing-secret"
)

// sink records what the adapter hands over; fail makes the next calls
// return an error.
type sink struct {
	mu   sync.Mutex
	got  []channels.Inbound
	fail int
	ch   chan channels.Inbound
}

func (s *sink) take(_ context.Context, m channels.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
	select {
	case s.ch <- m:
	default:
	}
	if s.fail > 0 {
		s.fail--
		return errors.New("temporal unavailable")
	}
	return nil
}

func (s *sink) all() []channels.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]channels.Inbound(nil), s.got...)
}

func (s *sink) failNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = n
}

type rig struct {
	fake    *fakeslack.Server
	adapter channels.Adapter
	status  *channels.Status
	sink    *sink
	logs    *logs
	ingress string // the adapter's ingress URL on loopback
}

// newRig starts a fake Slack and an adapter on it; change edits the
// settings (mode, tokens) before New.
func newRig(t *testing.T, change func(*channels.Settings)) *rig {
	t.Helper()
	fake, err := fakeslack.Start(fakeslack.Options{
		BotToken: botToken, AppToken: appToken, SigningSecret: secret,
		BotUserID: "U0BOT", BotID: "B0BOT",
		AckTimeout: 300 * time.Millisecond, AnswerTimeout: 3 * time.Second, PingInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	settings := channels.Settings{
		ID: "slack", Type: channels.TypeSlack, Enabled: true,
		APIBaseURL: strings.TrimSuffix(fake.APIURL(), "/"), // the adapter adds the slash
		BotToken:   botToken, SigningSecret: secret, AppToken: appToken,
	}
	if change != nil {
		change(&settings)
	}
	r := &rig{fake: fake, status: &channels.Status{}, sink: &sink{ch: make(chan channels.Inbound, 100)}, logs: &logs{}}
	a, err := slackch.New(channels.Deps{
		Settings: settings, Sink: r.sink.take, Status: r.status, Logf: r.logs.Logf,
		HTTP: &http.Client{Timeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.adapter = a
	// The gateway's route POST /ingress/<id>, reduced to the handler call.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		res := a.(channels.IngressHandler).Ingress(req.Context(), channels.IngressRequest{Header: req.Header, Body: body, Received: time.Now()})
		if res.ContentType != "" {
			w.Header().Set("Content-Type", res.ContentType)
		}
		w.WriteHeader(res.Status)
		_, _ = w.Write(res.Body)
	}))
	t.Cleanup(srv.Close)
	r.ingress = srv.URL + "/ingress/slack"
	return r
}

// receive runs Receive until the test ends and returns its result channel.
func (r *rig) receive(t *testing.T) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() { done <- r.adapter.Receive(ctx); close(finished) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("Receive did not return after its context ended")
		}
	})
	return done
}

// waitState waits (bounded) until the status reaches state.
func (r *rig) waitState(t *testing.T, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.status.View().State != state {
		if time.Now().After(deadline) {
			t.Fatalf("status stayed %q, want %q (last error %q)", r.status.View().State, state, r.status.View().LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Shared with the other adapters' tests.
type logs = channeltest.Logs
