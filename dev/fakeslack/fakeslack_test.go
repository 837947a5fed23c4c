package fakeslack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/agentryhq/agentry/dev/fakeslack"
)

func start(t *testing.T) *fakeslack.Server {
	t.Helper()
	s, err := fakeslack.Start(fakeslack.Options{
		BotToken: "xoxb-1", AppToken: "xapp-1", SigningSecret: "sec",
		AckTimeout: 200 * time.Millisecond, AnswerTimeout: 300 * time.Millisecond, PingInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestWebAPIWithTheRealClient(t *testing.T) {
	s := start(t)
	ctx := ctxT(t)
	api := slack.New("xoxb-1", slack.OptionAPIURL(s.APIURL()))
	res, err := api.AuthTestContext(ctx)
	if err != nil || res.UserID != "U0BOT" || res.BotID != "B0BOT" {
		t.Fatalf("auth.test %+v %v", res, err)
	}
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hi", false), slack.MsgOptionTS("1.000001"))
	if err != nil || ts == "" {
		t.Fatalf("chat.postMessage %q %v", ts, err)
	}
	// A JSON body with a bearer token, as other clients send it.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.APIURL()+"chat.postMessage",
		bytes.NewReader([]byte(`{"channel":"C2","text":"json body"}`)))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer xoxb-1")
	hres, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		OK bool   `json:"ok"`
		TS string `json:"ts"`
	}
	_ = json.NewDecoder(hres.Body).Decode(&out)
	hres.Body.Close()
	posts := s.Sent()
	if !out.OK || len(posts) != 2 || posts[0] != (fakeslack.Post{Channel: "C1", Text: "hi", ThreadTS: "1.000001", TS: ts, At: posts[0].At}) || posts[0].At.IsZero() ||
		posts[1].Channel != "C2" || posts[1].Text != "json body" || posts[1].TS != out.TS || posts[1].TS <= posts[0].TS {
		t.Fatalf("posts %+v, json answer %+v", posts, out)
	}
	s.FailSends(1, 3*time.Second)
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hi", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
		t.Fatalf("429: %v", err)
	}
	s.RefuseChannel("C9", "is_archived")
	if _, _, err = api.PostMessageContext(ctx, "C9", slack.MsgOptionText("hi", false)); err == nil || err.Error() != "is_archived" {
		t.Fatalf("refused channel: %v", err)
	}
	if _, err = slack.New("xoxb-wrong", slack.OptionAPIURL(s.APIURL())).AuthTestContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("wrong token: %v", err)
	}
	s.RefuseToken()
	if _, err = api.AuthTestContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("refused token: %v", err)
	}
}

// receiver is an Events API endpoint that checks signatures with
// slack-go's own verifier and answers from a script.
type receiver struct {
	mu      sync.Mutex
	headers []http.Header
	answers []int // status per request; 0 = hang past the timeout
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sv, err := slack.NewSecretsVerifier(r.Header, "sec")
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if _, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken()); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.headers = append(rc.headers, r.Header.Clone())
	status := http.StatusOK
	if n := len(rc.headers) - 1; n < len(rc.answers) {
		status = rc.answers[n]
	}
	rc.mu.Unlock()
	if status == 0 {
		time.Sleep(600 * time.Millisecond)
		status = http.StatusOK
	}
	w.WriteHeader(status)
}

func TestDeliverSignsLikeSlackAndRetriesWithRetryHeaders(t *testing.T) {
	s := start(t)
	rc := &receiver{answers: []int{500, 0, 503, 500}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	d := s.Deliver(ctxT(t), srv.URL, s.Message("C1", "channel", "U1", "hi"))
	if d.OK || len(d.Attempts) != 4 {
		t.Fatalf("delivery %+v, want 4 failed attempts", d)
	}
	wantReason := []string{"", "http_error", "http_timeout", "http_error"}
	for i, a := range d.Attempts {
		if a.RetryNum != i || a.Reason != wantReason[i] {
			t.Errorf("attempt %d: %+v", i, a)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.headers) != 4 {
		t.Fatalf("receiver verified %d requests, want 4", len(rc.headers))
	}
	for i, h := range rc.headers[1:] {
		if h.Get("X-Slack-Retry-Num") != strconv.Itoa(i+1) || h.Get("X-Slack-Retry-Reason") != wantReason[i+1] {
			t.Errorf("retry %d headers %v", i+1, h)
		}
	}
	if rc.headers[0].Get("X-Slack-Retry-Num") != "" {
		t.Error("the first delivery carries a retry number")
	}
}

func TestForgedAndStaleRequestsFailSlackGosVerifier(t *testing.T) {
	s := start(t)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	ctx := ctxT(t)
	ev := s.Message("C1", "channel", "U1", "hi")
	for name, f := range map[string]func() (int, error){
		"forged":   func() (int, error) { return s.DeliverForged(ctx, srv.URL, ev) },
		"unsigned": func() (int, error) { return s.DeliverUnsigned(ctx, srv.URL, ev) },
		"stale":    func() (int, error) { return s.DeliverStale(ctx, srv.URL, ev, 6*time.Minute) },
	} {
		if st, err := f(); err != nil || st != http.StatusUnauthorized {
			t.Errorf("%s: %d %v", name, st, err)
		}
	}
	if st, _, err := s.URLVerification(ctx, srv.URL, "c"); err != nil || st != http.StatusOK {
		t.Errorf("url_verification: %d %v", st, err)
	}
}

func TestSocketModeWithTheRealClientRedeliversUntilAcked(t *testing.T) {
	s := start(t)
	api := slack.New("xoxb-1", slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken("xapp-1"))
	sm := socketmode.New(api)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	go func() { _ = sm.RunContext(ctx) }()
	env := s.Push(s.Message("C1", "channel", "U1", "hi"))
	var attempts []int
	for len(attempts) < 2 {
		select {
		case evt := <-sm.Events:
			if evt.Type != socketmode.EventTypeEventsAPI {
				continue
			}
			api, ok := evt.Data.(slackevents.EventsAPIEvent)
			if !ok || api.InnerEvent.Type != "message" || evt.Request.EnvelopeID != env {
				t.Fatalf("event %+v", evt)
			}
			attempts = append(attempts, evt.Request.RetryAttempt)
			if len(attempts) == 2 { // ack only the redelivery
				if err := sm.AckCtx(ctx, env, nil); err != nil {
					t.Fatal(err)
				}
			}
		case <-ctx.Done():
			t.Fatal("no redelivery")
		}
	}
	if err := s.WaitAcked(ctx, env); err != nil {
		t.Fatal(err)
	}
	if attempts[0] != 0 || attempts[1] != 1 || s.Envelope(env).Deliveries != 2 || s.Connections() != 1 {
		t.Errorf("attempts %v state %+v", attempts, s.Envelope(env))
	}
}
