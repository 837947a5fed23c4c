package llm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
)

func TestRetryAfter429ThenSuccess(t *testing.T) {
	f := startFake(t)
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			f.Reset()
			f.Script(fakellm.Rule{Status: 429, RetryAfter: "1", Times: 1})
			var waits []string
			var hooked []int
			p := fakeProvider(t, f, typ, &waits)
			rp := p.(*retryProvider)
			rp.policy.OnRetry = func(attempt int, err error) {
				var pe *ProviderError
				if !errors.As(err, &pe) || pe.StatusCode != 429 {
					t.Errorf("OnRetry error %v", err)
				}
				hooked = append(hooked, attempt)
			}
			resp, err := p.Chat(context.Background(), userReq("m", "hi"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Attempts != 2 || resp.Content != "echo: hi" {
				t.Fatalf("attempts %d content %q", resp.Attempts, resp.Content)
			}
			if len(waits) != 1 || waits[0] != "1s" {
				t.Fatalf("waits %v, want the provider's Retry-After of 1s", waits)
			}
			if len(hooked) != 1 || hooked[0] != 2 || f.CallCount() != 2 {
				t.Fatalf("hook %v calls %d", hooked, f.CallCount())
			}
		})
	}
}

func TestRetryDelayCapsRetryAfterAt30s(t *testing.T) {
	p := DefaultRetryPolicy()
	long := &ProviderError{StatusCode: 429, Retryable: true, RetryAfter: 120 * time.Second}
	if d := p.Delay(1, long); d != 30*time.Second {
		t.Fatalf("Retry-After 120s gave %s, want 30s", d)
	}
	p.MaxRetryAfter = time.Hour // a policy cannot raise the cap of the spec
	if d := p.Delay(1, long); d != 30*time.Second {
		t.Fatalf("cap raised to %s", d)
	}
	short := &ProviderError{StatusCode: 503, Retryable: true, RetryAfter: 2 * time.Second}
	if d := p.Delay(3, short); d != 2*time.Second {
		t.Fatalf("Retry-After 2s gave %s", d)
	}
	// Without Retry-After: exponential backoff with jitter between half and all of base*2^(n-1).
	plain := &ProviderError{StatusCode: 500, Retryable: true}
	for retry, hi := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 10: 8 * time.Second} {
		for range 20 {
			if d := p.Delay(retry, plain); d < hi/2 || d > hi {
				t.Fatalf("retry %d backoff %s outside [%s, %s]", retry, d, hi/2, hi)
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"1", time.Second, true},
		{" 2.5 ", 2500 * time.Millisecond, true},
		{"-3", 0, false},
		{"soon", 0, false},
		{now.Add(45 * time.Second).Format(http.TimeFormat), 45 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"99999999999", 24 * time.Hour, true},
	}
	for _, c := range cases {
		got, ok := ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %s %v, want %s %v", c.in, got, ok, c.want, c.ok)
		}
	}
	// The cap applies to a date too.
	pe := &ProviderError{StatusCode: 429, Retryable: true}
	pe.RetryAfter, _ = ParseRetryAfter(now.Add(10*time.Minute).Format(http.TimeFormat), now)
	if d := DefaultRetryPolicy().Delay(1, pe); d != MaxRetryAfter {
		t.Fatalf("date Retry-After not capped: %s", d)
	}
}

func TestRetryGivesUpWhenWaitWouldPassDeadline(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Status: 429, RetryAfter: "10", Message: "slow down"})
	var waits []string
	p := fakeProvider(t, f, TypeOpenAI, &waits)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := p.Chat(ctx, userReq("m", "x"))
	if resp != nil || err == nil {
		t.Fatalf("resp %v err %v", resp, err)
	}
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 429 || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("want the last 429 naming the deadline, got %v", err)
	}
	if len(waits) != 0 || f.CallCount() != 1 {
		t.Fatalf("waited %v, calls %d", waits, f.CallCount())
	}
}

func TestRetryDoesNotRepeatClientErrors(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Status: 400, Message: "bad request"})
	var waits []string
	p := fakeProvider(t, f, TypeAnthropic, &waits)
	_, err := p.Chat(context.Background(), userReq("m", "x"))
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 400 || pe.Type != "invalid_request_error" || pe.Retryable {
		t.Fatalf("err %v", err)
	}
	if f.CallCount() != 1 || len(waits) != 0 {
		t.Fatalf("400 retried: calls %d", f.CallCount())
	}
}

func TestRetryStopsAfterMaxAttempts(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Status: 503})
	var waits []string
	p := fakeProvider(t, f, TypeOllama, &waits)
	_, err := p.Chat(context.Background(), userReq("m", "x"))
	if err == nil || !strings.Contains(err.Error(), "after 3 attempts") || f.CallCount() != 3 || len(waits) != 2 {
		t.Fatalf("err %v calls %d waits %v", err, f.CallCount(), waits)
	}
	// MaxRetries < 0 disables retries.
	f.Reset()
	f.Script(fakellm.Rule{Status: 503})
	cfg := fakeConfig(f, TypeOllama)
	cfg.MaxRetries = -1
	np, _ := NewProvider("ollama", cfg)
	if _, err := np.Chat(context.Background(), userReq("m", "x")); err == nil || f.CallCount() != 1 {
		t.Fatalf("no-retry provider: err %v calls %d", err, f.CallCount())
	}
}

func TestWithRetryDoesNotNest(t *testing.T) {
	p, _ := NewProvider("ollama", ProviderConfig{})
	again := WithRetry(p, RetryPolicy{MaxAttempts: 5})
	if _, nested := again.(*retryProvider).inner.(*retryProvider); nested {
		t.Fatal("WithRetry nested a retry wrapper")
	}
}

// freePort returns an address where nothing listens.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestUnreachableOllamaNamesProviderAndAddress(t *testing.T) {
	base := "http://" + freePort(t)
	p, err := NewProvider("ollama", ProviderConfig{Type: TypeOllama, BaseURL: base, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			_, err = p.Stream(context.Background(), userReq("llama3.2", "hi"), nil)
		} else {
			_, err = p.Chat(context.Background(), userReq("llama3.2", "hi"))
		}
		if !IsUnreachable(err) {
			t.Fatalf("stream=%v: not unreachable: %v", stream, err)
		}
		msg := err.Error()
		for _, want := range []string{`llm provider "ollama"`, base, "is unreachable", "is Ollama running at " + base + "?"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("stream=%v: %q lacks %q", stream, msg, want)
			}
		}
	}

	// Other types name provider and address without the Ollama hint.
	p, _ = NewProvider("local-vllm", ProviderConfig{Type: TypeOpenAI, BaseURL: base + "/v1", MaxRetries: -1})
	_, err = p.Chat(context.Background(), userReq("m", "hi"))
	if !IsUnreachable(err) || !strings.Contains(err.Error(), `"local-vllm"`) || strings.Contains(err.Error(), "Ollama") {
		t.Fatalf("vllm unreachable: %v", err)
	}
}

func TestUnreachableDefaultOllamaHint(t *testing.T) {
	h := newHTTPBase("ollama", TypeOllama, DefaultOllamaBaseURL, ProviderConfig{})
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	err := h.transportError(context.Background(), dial)
	want := `llm provider "ollama" (http://127.0.0.1:11434) is unreachable: dial tcp: connect: connection refused; is Ollama running at http://127.0.0.1:11434?`
	if err.Error() != want || !IsUnreachable(err) || !IsRetryable(err) {
		t.Fatalf("got  %q\nwant %q", err.Error(), want)
	}
	dns := &net.DNSError{Err: "no such host", Name: "nohost.invalid", IsNotFound: true}
	if err := h.transportError(context.Background(), dns); !IsUnreachable(err) || IsRetryable(err) {
		t.Fatalf("unknown host: %v retryable=%v", err, IsRetryable(err))
	}
}

func TestWithoutRetriesMakesOneAttempt(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Status: 429, RetryAfter: "90", Times: 1})
	var waits []string
	p := fakeProvider(t, f, TypeOpenAI, &waits)
	_, err := p.Chat(WithoutRetries(context.Background()), userReq("m", "hi"))
	if !IsRetryable(err) || f.CallCount() != 1 || len(waits) != 0 {
		t.Fatalf("err %v calls %d waits %v: want one attempt and the retryable 429 handed back", err, f.CallCount(), waits)
	}
	if d := RetryAfter(err); d != MaxRetryAfter {
		t.Fatalf("RetryAfter %s, want the provider's 90s capped at %s", d, MaxRetryAfter)
	}
	if RetryAfter(errors.New("plain")) != 0 {
		t.Fatal("an error without Retry-After asks for no wait")
	}
}
