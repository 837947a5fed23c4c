package llm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
)

// recordingGate is a Gate that counts admissions and settlements.
type recordingGate struct {
	mu       sync.Mutex
	admitted int
	reject   error
	modify   func(*Call)
	settles  []*settlement
}

type settlement struct {
	resp      *Response
	err       error
	attempts  int
	ctxErr    error
	callID    string
	count     atomic.Int32
	retries   []int
	retriesMu sync.Mutex
}

func (s *settlement) Settle(ctx context.Context, resp *Response, err error, attempts int) {
	s.count.Add(1)
	s.resp, s.err, s.attempts, s.ctxErr = resp, err, attempts, ctx.Err()
}

func (s *settlement) OnRetry(attempt int, err error) {
	s.retriesMu.Lock()
	s.retries = append(s.retries, attempt)
	s.retriesMu.Unlock()
}

func (g *recordingGate) Admit(ctx context.Context, call *Call) (Admission, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admitted++
	if g.reject != nil {
		return nil, g.reject
	}
	if g.modify != nil {
		g.modify(call)
	}
	s := &settlement{callID: call.Meta.CallID}
	g.settles = append(g.settles, s)
	return s, nil
}

func (g *recordingGate) only(t *testing.T) *settlement {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.admitted != 1 || len(g.settles) != 1 {
		t.Fatalf("admitted %d, admissions %d; want 1 each", g.admitted, len(g.settles))
	}
	s := g.settles[0]
	if n := s.count.Load(); n != 1 {
		t.Fatalf("Settle called %d times", n)
	}
	return s
}

func newTestRouter(t *testing.T, f *fakellm.Server) (*Router, *recordingGate) {
	t.Helper()
	providers := map[string]Provider{}
	for _, typ := range allTypes {
		providers[typ] = fakeProvider(t, f, typ, nil)
	}
	r := NewRouter(providers, TypeOllama)
	g := &recordingGate{}
	r.SetGate(g)
	return r, g
}

func TestRouterAdmitsAndSettlesOnce(t *testing.T) {
	f := startFake(t)
	r, g := newTestRouter(t, f)
	call := &Call{Model: "llama3.2", Request: userReq("", "hi"), Meta: CallMeta{Source: SourceChat}}
	resp, err := r.Do(context.Background(), call)
	if err != nil || resp.Content != "echo: hi" {
		t.Fatalf("%v %v", resp, err)
	}
	s := g.only(t)
	if s.resp != resp || s.err != nil || s.attempts != 1 || s.callID == "" || call.Meta.CallID != s.callID {
		t.Fatalf("settlement %+v", s)
	}
	if call.Provider != TypeOllama || f.Calls()[0].Format != TypeOllama {
		t.Fatalf("default provider not used: %q", call.Provider)
	}
}

func TestRouterSettlesOnProviderError(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Status: 400, Message: "nope"})
	r, g := newTestRouter(t, f)
	_, err := r.Do(context.Background(), &Call{Provider: TypeOpenAI, Model: "m", Request: userReq("", "x")})
	s := g.only(t)
	if err == nil || s.err != err || s.resp != nil || s.attempts != 1 {
		t.Fatalf("err %v settlement %+v", err, s)
	}
}

func TestRouterSettlesOnCancelledContext(t *testing.T) {
	f := startFake(t)
	f.Script(fakellm.Rule{Delay: fakellm.Duration(30 * time.Second)})
	r, g := newTestRouter(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for f.CallCount() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err := r.Do(ctx, &Call{Provider: TypeAnthropic, Model: "m", Request: userReq("", "x"), Stream: true})
	s := g.only(t)
	if !errors.Is(err, context.Canceled) || !errors.Is(s.err, context.Canceled) {
		t.Fatalf("err %v settle err %v", err, s.err)
	}
	if s.ctxErr != nil {
		t.Fatalf("Settle got a cancelled context: %v", s.ctxErr)
	}
}

func TestRouterSettlesPartialStreamAndCountsRetries(t *testing.T) {
	f := startFake(t)
	f.Script(
		fakellm.Rule{Status: 429, RetryAfter: "1", Times: 1},
		fakellm.Rule{Reply: "aaaa bbbb cccc dddd", Chunks: 4, CutAfterChunks: 2},
	)
	r, g := newTestRouter(t, f)
	var got strings.Builder
	resp, err := r.Do(context.Background(), &Call{Provider: TypeOpenAI, Model: "m", Request: userReq("", "x"), Stream: true,
		OnDelta: func(s string) error { got.WriteString(s); return nil }})
	s := g.only(t)
	if !errors.Is(err, ErrStreamIncomplete) || resp == nil || resp.Content != got.String() || resp.Content == "" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if s.resp != resp || s.attempts != 2 || resp.Attempts != 2 || len(s.retries) != 1 || s.retries[0] != 2 {
		t.Fatalf("settlement attempts %d retries %v resp attempts %d", s.attempts, s.retries, resp.Attempts)
	}
}

func TestRouterGateRejectionSkipsProviderAndSettle(t *testing.T) {
	f := startFake(t)
	r, g := newTestRouter(t, f)
	budget := errors.New("budget exhausted")
	g.reject = budget
	_, err := r.Do(context.Background(), &Call{Model: "m", Request: userReq("", "x")})
	if !errors.Is(err, budget) || g.admitted != 1 || len(g.settles) != 0 || f.CallCount() != 0 {
		t.Fatalf("err %v admitted %d calls %d", err, g.admitted, f.CallCount())
	}
}

func TestRouterGateMayClampAndStripCaching(t *testing.T) {
	f := startFake(t)
	r, g := newTestRouter(t, f)
	g.modify = func(c *Call) { c.Request.MaxTokens = 77; c.Request.PromptCaching = false }
	req := userReq("", "x")
	req.MaxTokens, req.PromptCaching = 5000, true
	if _, err := r.Do(context.Background(), &Call{Provider: TypeAnthropic, Model: "claude", Request: req}); err != nil {
		t.Fatal(err)
	}
	rec := f.Calls()[0]
	if rec.MaxTokens != 77 || strings.Contains(string(rec.Body), "cache_control") || rec.Model != "claude" {
		t.Fatalf("provider saw max_tokens %d body %s", rec.MaxTokens, rec.Body)
	}
}

func TestRouterUnknownProvider(t *testing.T) {
	f := startFake(t)
	r, g := newTestRouter(t, f)
	_, err := r.Do(context.Background(), &Call{Provider: "nope", Model: "m", Request: userReq("", "x")})
	var upe *UnknownProviderError
	if !errors.Is(err, ErrUnknownProvider) || !errors.As(err, &upe) || upe.ID != "nope" || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("err %v", err)
	}
	if g.admitted != 0 {
		t.Fatal("gate consulted for an unknown provider")
	}
	if _, err := r.Do(context.Background(), &Call{Provider: TypeOllama, Request: userReq("", "x")}); !errors.Is(err, ErrModelRequired) {
		t.Fatalf("missing model: %v", err)
	}
}

type panickingProvider struct{}

func (panickingProvider) ID() string      { return "boom" }
func (panickingProvider) Address() string { return "nowhere" }
func (panickingProvider) Chat(context.Context, Request) (*Response, error) {
	panic("provider bug")
}
func (panickingProvider) Stream(context.Context, Request, func(string) error) (*Response, error) {
	panic("provider bug")
}

func TestRouterSettlesOnPanic(t *testing.T) {
	r := NewRouter(map[string]Provider{"boom": panickingProvider{}}, "boom")
	g := &recordingGate{}
	r.SetGate(g)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic swallowed")
			}
		}()
		_, _ = r.Do(context.Background(), &Call{Model: "m", Request: userReq("", "x")})
	}()
	if s := g.only(t); s.err == nil || !strings.Contains(s.err.Error(), "panic") {
		t.Fatalf("settle err %v", s.err)
	}
}

func TestRouterConcurrentCallsSettleEachOnce(t *testing.T) {
	f := startFake(t)
	r, g := newTestRouter(t, f)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = r.Do(context.Background(), &Call{Provider: allTypes[i%3], Model: "m", Request: userReq("", "x"), Stream: i%2 == 0})
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, s := range g.settles {
		if s.count.Load() != 1 || ids[s.callID] {
			t.Fatalf("settle count %d, duplicate id %v", s.count.Load(), ids[s.callID])
		}
		ids[s.callID] = true
	}
	if g.admitted != 40 || len(ids) != 40 || f.CallCount() != 40 {
		t.Fatalf("admitted %d ids %d calls %d", g.admitted, len(ids), f.CallCount())
	}
}
