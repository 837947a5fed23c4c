package delivery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/internal/signature"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

func TestParseHeaderLines(t *testing.T) {
	lines, err := ParseHeaderLines("Authorization: Bearer abc\n\n# comment\nx-team:  ops \r\nX-Multi: a\nX-Multi: b")
	if err != nil {
		t.Fatal(err)
	}
	want := []HeaderLine{{"Authorization", "Bearer abc"}, {"X-Team", "ops"}, {"X-Multi", "a"}, {"X-Multi", "b"}}
	if len(lines) != len(want) {
		t.Fatalf("lines %v", lines)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %v, want %v", i, lines[i], want[i])
		}
	}
	for text, wantErr := range map[string]string{
		"no colon here":               "line 1",
		"ok: 1\nBad Name: x":          "line 2",
		"X-Agentry-Signature: forged": "set by Agentry",
		"x-agentry-delivery: forged":  "set by Agentry",
		"Content-Length: 3":           "set by Agentry",
	} {
		_, err := ParseHeaderLines(text)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: err %v, want %q", text, err, wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "forged") {
			t.Errorf("%q: error quotes the value: %v", text, err)
		}
	}
}

func TestRedactAndMergeHeaders(t *testing.T) {
	text := "Authorization: Bearer abc\nX-Team: ops\nX-Api-Token: t0k"
	red := RedactHeaderLines(text)
	// Every value is a secret (issue 18 item 2), not only credential names.
	if strings.Contains(red, "abc") || strings.Contains(red, "t0k") || strings.Contains(red, "ops") || !strings.Contains(red, "X-Team: "+config.Redacted) {
		t.Fatalf("redacted: %q", red)
	}
	merged, err := MergeRedacted(text, red+"\nX-New: 1")
	if err != nil {
		t.Fatal(err)
	}
	if merged != text+"\nX-New: 1" {
		t.Fatalf("merged %q", merged)
	}
	if _, err := MergeRedacted("", "Authorization: "+config.Redacted); err == nil {
		t.Fatal("redacted value without an earlier one was accepted")
	}
}

type fakeResolver map[string][]string

func (f fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	ips, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []net.IPAddr
	for _, ip := range ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(ip)})
	}
	return out, nil
}

func TestCheckTarget(t *testing.T) {
	strict := netguard.Policy{Enabled: true}
	res := fakeResolver{"public.example": {"93.184.216.34"}, "internal.example": {"10.1.2.3"}, "sneaky.example": {"93.184.216.34", "127.0.0.1"}}
	ctx := context.Background()
	for raw, ok := range map[string]bool{
		"https://public.example/hook":   true,
		"http://93.184.216.34:8080/x":   true,
		"file:///etc/passwd":            false,
		"/relative/path":                false,
		"ftp://public.example/":         false,
		"http://127.0.0.1:9/":           false,
		"http://localhost:9/":           false,
		"http://10.0.0.5/":              false,
		"http://192.168.1.1/":           false,
		"http://169.254.169.254/":       false,
		"http://[::1]/":                 false,
		"https://internal.example/":     false,
		"https://sneaky.example/":       false,
		"https://nxdomain.example/":     false,
		"javascript:alert(1)":           false,
		"http://user:pw@public.example": true,
	} {
		_, err := CheckTarget(ctx, strict, res, "to", raw)
		if (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", raw, err, ok)
		}
		var te *TargetError
		if err != nil && !errors.As(err, &te) {
			t.Errorf("%s: %T is not a TargetError", raw, err)
		}
	}
	loop := netguard.Policy{Enabled: true, AllowLoopback: true}
	if _, err := CheckTarget(ctx, loop, res, "to", "http://127.0.0.1:9/"); err != nil {
		t.Errorf("loopback allowed: %v", err)
	}
	if _, err := CheckTarget(ctx, loop, res, "to", "http://10.0.0.5/"); err == nil {
		t.Errorf("private allowed by the loopback switch")
	}
}

func TestDisplayURLDropsCredentials(t *testing.T) {
	if got := DisplayURL("https://u:p@h.example:8443/p/q?token=abc#f"); got != "https://h.example:8443/p/q" {
		t.Fatalf("got %s", got)
	}
}

// receiver records requests to a loopback server.
type receiver struct {
	mu     sync.Mutex
	reqs   []*http.Request
	bodies [][]byte
	status []int // answered in order; then 200
	header http.Header
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.bodies = append(r.bodies, body)
	code := 200
	if n := len(r.reqs); n <= len(r.status) {
		code = r.status[n-1]
	}
	r.mu.Unlock()
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	io.WriteString(w, "answer body")
}

func loopbackSender() *Sender {
	return NewSender(netguard.Policy{Enabled: true, AllowLoopback: true}, 5*time.Second)
}

func TestSenderSignsAndKeepsConfiguredHeaders(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	lines, _ := ParseHeaderLines("Authorization: Bearer xyz\nX-Team: ops\nContent-Type: application/vnd.agentry+json")
	s := loopbackSender()
	body := []byte(`{"text":"hi"}`)
	res := s.Send(context.Background(), Target{URL: srv.URL + "/hook", Method: "PUT", Headers: lines, Secret: "k"}, "dlv_1", body)
	if res.Err != nil || res.StatusCode != 200 {
		t.Fatalf("send: %+v", res)
	}
	r := rec.reqs[0]
	if r.Method != "PUT" || r.Header.Get("Authorization") != "Bearer xyz" || r.Header.Get("X-Team") != "ops" ||
		r.Header.Get("Content-Type") != "application/vnd.agentry+json" || r.Header.Get(signature.HeaderDelivery) != "dlv_1" {
		t.Fatalf("headers: %v", r.Header)
	}
	if err := signature.Verify("k", r.Header, rec.bodies[0], time.Now(), 0); err != nil {
		t.Fatalf("receiver cannot verify: %v", err)
	}

	// Unsigned without a secret.
	res = s.Send(context.Background(), Target{URL: srv.URL}, "dlv_2", body)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	r = rec.reqs[1]
	if r.Header.Get(signature.HeaderSignature) != "" || r.Header.Get(signature.HeaderTimestamp) != "" || r.Method != "POST" ||
		r.Header.Get("Content-Type") != "application/json" || r.Header.Get(signature.HeaderDelivery) != "dlv_2" {
		t.Fatalf("unsigned request headers: %v", r.Header)
	}
}

func TestSenderClassifiesAnswers(t *testing.T) {
	for _, c := range []struct {
		status    int
		retryable bool
	}{{500, true}, {502, true}, {503, true}, {429, true}, {400, false}, {401, false}, {404, false}, {410, false}, {302, false}} {
		rec := &receiver{status: []int{c.status}, header: http.Header{"Retry-After": {"7"}, "Location": {"http://elsewhere.example/"}}}
		srv := httptest.NewServer(rec)
		res := loopbackSender().Send(context.Background(), Target{URL: srv.URL + "/?token=secret"}, "d", []byte("{}"))
		srv.Close()
		if res.Err == nil || res.Retryable != c.retryable || res.StatusCode != c.status {
			t.Errorf("%d: %+v", c.status, res)
		}
		if res.Err != nil && strings.Contains(res.Err.Error(), "secret") {
			t.Errorf("%d: error shows the query: %v", c.status, res.Err)
		}
		if c.status == 429 && res.RetryAfter != 7*time.Second {
			t.Errorf("429: retry after %v", res.RetryAfter)
		}
	}
	// Network error: retryable.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	res := loopbackSender().Send(context.Background(), Target{URL: "http://" + addr}, "d", []byte("{}"))
	if res.Err == nil || !res.Retryable {
		t.Errorf("connection refused: %+v", res)
	}
	// SSRF refusal at dial time: not retryable.
	strict := NewSender(netguard.Policy{Enabled: true}, time.Second)
	res = strict.Send(context.Background(), Target{URL: "http://" + addr}, "d", []byte("{}"))
	if res.Err == nil || res.Retryable {
		t.Errorf("blocked: %+v", res)
	}
}

func TestRetryFromConfig(t *testing.T) {
	cfg := config.Defaults()
	r, err := RetryFromConfig(&cfg)
	if err != nil || r != (workflows.DeliveryRetry{}).WithDefaults() || r.RetryFor != 24*time.Hour {
		t.Fatalf("defaults: %+v %v", r, err)
	}
	cfg.Runtime.Delivery = config.DeliveryConfig{RetryFor: time.Minute, InitialInterval: 100 * time.Millisecond, MaxInterval: 2 * time.Second}
	r, err = RetryFromConfig(&cfg)
	if err != nil || r.RetryFor != time.Minute || r.InitialInterval != 100*time.Millisecond || r.MaxInterval != 2*time.Second || r.AttemptTimeout != workflows.DefaultDeliveryAttemptTimeout {
		t.Fatalf("set: %+v %v", r, err)
	}
}

func TestHookMatching(t *testing.T) {
	hooks, err := ParseHooks([]config.HookConfig{
		{On: []string{"run.*"}, URL: "https://h.example/a"},
		{On: []string{"run.finished", "cost.*"}, Agents: []string{"writer"}, URL: "https://h.example/b", SecretEnv: "HOOK_SECRET"},
	}, netguard.Policy{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ, agent string) models.Event { return models.Event{Type: typ, AgentID: agent} }
	for _, c := range []struct {
		hook int
		ev   models.Event
		want bool
	}{
		{0, ev("run.started", ""), true}, {0, ev("run.finished", "x"), true}, {0, ev("task.created", ""), false},
		{1, ev("run.finished", "writer"), true}, {1, ev("run.finished", "other"), false}, {1, ev("run.started", "writer"), false},
		{1, ev("cost.budget_alert", "writer"), true},
	} {
		if got := hooks[c.hook].Matches(c.ev); got != c.want {
			t.Errorf("hook %d %v: %v", c.hook, c.ev, got)
		}
	}
	if hooks[0].Key == hooks[1].Key || len(hooks[0].Key) != 16 {
		t.Errorf("keys %q %q", hooks[0].Key, hooks[1].Key)
	}
	if _, err := ParseHooks([]config.HookConfig{{On: []string{"run.*"}, URL: "file:///etc/passwd"}}, netguard.Policy{Enabled: true}); err == nil {
		t.Error("file URL accepted")
	}
	if _, err := ParseHooks([]config.HookConfig{{URL: "https://h.example"}}, netguard.Policy{Enabled: true}); err == nil {
		t.Error("hook without on accepted")
	}
	// The secret only from the named variable; unset refuses to send.
	if _, err := hookTarget(&workflows.HookTarget{URL: "https://h.example", SecretEnv: "HOOK_SECRET"}, func(string) (string, bool) { return "", false }); err == nil {
		t.Error("unset secret_env accepted")
	}
	tg, err := hookTarget(&workflows.HookTarget{URL: "https://h.example", SecretEnv: "HOOK_SECRET"}, func(k string) (string, bool) { return "v-" + k, true })
	if err != nil || tg.Secret != "v-HOOK_SECRET" {
		t.Errorf("target %+v %v", tg, err)
	}
}

func openStore(t *testing.T) *models.Store {
	t.Helper()
	st, err := models.Open(context.Background(), models.Options{DSN: filepath.Join(t.TempDir(), "app.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestChannelSettingsOverridesAndRedaction(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	cfg := config.Defaults()
	cfg.Channels.Webhook = config.WebhookChannelConfig{Enabled: true, URL: "https://h.example/in", Method: "POST",
		Headers: "Authorization: Bearer file-token\nX-Team: ops", Secret: "file-secret"}
	ch := &Channels{Config: &cfg, Store: st, Secrets: secrets.New(st, t.TempDir()), Policy: netguard.Policy{Enabled: true},
		Resolver: fakeResolver{"other.example": {"93.184.216.34"}, "intranet.example": {"10.0.0.1"}}}

	v, err := ch.View(ctx, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	if v.Settings["secret"] != config.Redacted || strings.Contains(v.Settings["headers"].(string), "file-token") || len(v.Overridden) != 0 {
		t.Fatalf("view: %+v", v)
	}
	if _, err := ch.View(ctx, "slack"); !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("unknown channel: %v", err)
	}

	// Bad input changes nothing.
	for key, val := range map[string]any{"colour": "blue", "enabled": "yes", "method": "DELETE", "url": "file:///etc/passwd",
		"headers": "X-Agentry-Signature: x"} {
		var se *fault.Invalid
		if _, err := ch.Patch(ctx, "webhook", map[string]any{key: val}, "admin"); !errors.As(err, &se) || se.Field != "settings."+key {
			t.Errorf("%s=%v: %v", key, val, err)
		}
	}
	if _, err := ch.Patch(ctx, "webhook", map[string]any{"url": "https://intranet.example/"}, "admin"); err == nil {
		t.Error("private url accepted")
	}

	v, err = ch.Patch(ctx, "webhook", map[string]any{"url": "https://other.example/x", "secret": "db-secret", "method": "put",
		"headers": RedactHeaderLines(cfg.Channels.Webhook.Headers) + "\nX-Extra: 1"}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if v.Settings["url"] != "https://other.example/x" || v.Settings["method"] != "PUT" || v.Settings["secret"] != config.Redacted ||
		strings.Join(v.Overridden, ",") != "headers,method,secret,url" {
		t.Fatalf("after patch: %+v", v)
	}
	eff, _, err := ch.Webhook(ctx)
	if err != nil || eff.Secret != "db-secret" || eff.Headers != "Authorization: Bearer file-token\nX-Team: ops\nX-Extra: 1" {
		t.Fatalf("effective: %+v %v", eff, err)
	}
	if cfg.Channels.Webhook.URL != "https://h.example/in" {
		t.Fatal("config was changed")
	}
	// Header values set through the API are sealed like the secret: the
	// row keeps the names only, and no answer shows a value.
	var rows []map[string]any
	st.DB.Table("channel_overrides").Find(&rows)
	if raw := fmt.Sprint(rows); strings.Contains(raw, "file-token") || strings.Contains(raw, "ops") || !strings.Contains(raw, "X-Extra") {
		t.Fatalf("override row holds header values in clear: %s", raw)
	}
	if h := v.Settings["headers"].(string); strings.Contains(h, "file-token") || strings.Contains(h, "ops") || strings.Contains(h, ": 1") {
		t.Fatalf("headers in the answer: %q", h)
	}

	// A message's `to` is used for that message only.
	tg, err := ch.Target(ctx, workflows.DeliveryInput{Channel: "webhook", To: "https://elsewhere.example/once"})
	if err != nil || tg.URL != "https://elsewhere.example/once" || tg.Secret != "db-secret" || tg.Method != "PUT" {
		t.Fatalf("target with to: %+v %v", tg, err)
	}
	tg, _ = ch.Target(ctx, workflows.DeliveryInput{Channel: "webhook"})
	if tg.URL != "https://other.example/x" {
		t.Fatalf("to leaked into the settings: %+v", tg)
	}

	// Clearing the secret sends unsigned; disabling refuses for good.
	if _, err := ch.Patch(ctx, "webhook", map[string]any{"secret": ""}, "admin"); err != nil {
		t.Fatal(err)
	}
	if eff, _, _ := ch.Webhook(ctx); eff.Secret != "" {
		t.Fatalf("secret not cleared")
	}
	if _, err := ch.SetEnabled(ctx, "webhook", false, "admin"); err != nil {
		t.Fatal(err)
	}
	var perm *PermanentError
	if _, err := ch.Target(ctx, workflows.DeliveryInput{Channel: "webhook"}); !errors.As(err, &perm) || !errors.Is(err, ErrChannelDisabled) {
		t.Fatalf("disabled: %v", err)
	}
	if _, err := ch.Check(ctx, "webhook", ""); !errors.Is(err, ErrChannelDisabled) {
		t.Fatalf("check disabled: %v", err)
	}
}
