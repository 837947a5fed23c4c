package costs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

func TestCostIsExactIntegerMicrosRoundedUp(t *testing.T) {
	p := newPrice("openai", "m", config.PriceConfig{InputPerMTok: 0.15, OutputPerMTok: 0.6, CachedInputPerMTok: 0.075})
	cases := []struct {
		u    llm.Usage
		want int64
	}{
		{llm.Usage{}, 0},
		{llm.Usage{InputTokens: 1}, 1},                // 0.15 micros -> 1
		{llm.Usage{InputTokens: 1_000_000}, 150_000},  // $0.15
		{llm.Usage{OutputTokens: 1_000_000}, 600_000}, // $0.60
		{llm.Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000}, 75_000},
		{llm.Usage{InputTokens: 10, CachedInputTokens: 20}, 1}, // cached capped at input
		{llm.Usage{InputTokens: 3, OutputTokens: 5}, 4},        // 0.45 + 3.0 = 3.45 -> 4
	}
	for _, c := range cases {
		if got := p.Cost(c.u); got != c.want {
			t.Errorf("Cost(%+v) = %d, want %d", c.u, got, c.want)
		}
	}
	// No cached price: cached tokens cost what input costs.
	q := newPrice("x", "y", config.PriceConfig{InputPerMTok: 2, OutputPerMTok: 4})
	if got := q.Cost(llm.Usage{InputTokens: 1_000_000, CachedInputTokens: 500_000}); got != 2_000_000 {
		t.Errorf("cached without a cached price = %d", got)
	}
	// Huge numbers saturate instead of overflowing.
	big := newPrice("x", "y", config.PriceConfig{OutputPerMTok: 1e6})
	if got := big.Cost(llm.Usage{OutputTokens: math.MaxInt64}); got != math.MaxInt64 {
		t.Errorf("saturation = %d", got)
	}
	var none *Price
	if none.Cost(llm.Usage{InputTokens: 5}) != 0 {
		t.Error("nil price must cost 0")
	}
}

func TestOutputTokensForFitsTheBudget(t *testing.T) {
	p := newPrice("x", "y", config.PriceConfig{InputPerMTok: 3, OutputPerMTok: 15})
	for _, budget := range []int64{0, 1, 7, 100, 12_345, 1_000_000} {
		for _, input := range []int64{0, 1, 333, 10_000} {
			n := p.OutputTokensFor(budget, input)
			if n < 0 {
				if p.Cost(llm.Usage{InputTokens: input}) <= budget {
					t.Errorf("budget %d input %d: refused though the input fits", budget, input)
				}
				continue
			}
			if c := p.Cost(llm.Usage{InputTokens: input, OutputTokens: n}); c > budget {
				t.Errorf("budget %d input %d: %d tokens cost %d", budget, input, n, c)
			}
		}
	}
	free := newPrice("x", "y", config.PriceConfig{InputPerMTok: 1})
	if free.OutputTokensFor(10, 1) != math.MaxInt64 {
		t.Error("free output must be unbounded")
	}
}

func TestPriceBookPicksThePriceInEffect(t *testing.T) {
	history := []models.PriceVersion{
		{Provider: "openai", Model: "gpt", EffectiveDate: "2024-01-01", Version: "v1", InputPerMTok: 1, OutputPerMTok: 1},
		{Provider: "openai", Model: "gpt", EffectiveDate: "2025-01-01", Version: "v2", InputPerMTok: 2, OutputPerMTok: 2},
	}
	b := NewPriceBook(history, map[string]config.PriceConfig{
		"openai/gpt":   {EffectiveDate: "2026-01-01", Version: "v3", InputPerMTok: 3},
		"openai/other": {Version: "always"},
	})
	at := func(s string) time.Time { t, _ := time.Parse(time.DateOnly, s); return t }
	for day, want := range map[string]string{"2023-12-31": "", "2024-06-01": "v1", "2025-01-01": "v2", "2026-03-01": "v3"} {
		p, ok := b.Lookup("openai", "gpt", at(day))
		got := ""
		if ok {
			got = p.Version
		}
		if got != want {
			t.Errorf("%s: price %q, want %q", day, got, want)
		}
	}
	if p, ok := b.Lookup("openai", "other", at("1999-01-01")); !ok || p.Version != "always" {
		t.Error("a price without an effective date applies always")
	}
}

func TestEstimateTokensIsConservative(t *testing.T) {
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "The quick brown fox jumps over the lazy dog."}}}
	// ~10 tokens with common tokenizers.
	if n := EstimateInputTokens(req); n < 15 || n > 30 {
		t.Fatalf("estimate %d", n)
	}
}

func TestBreakerStateMachine(t *testing.T) {
	bs := newBreakers()
	now := time.Unix(1_700_000_000, 0)
	const threshold, cooldown = 3, 10 * time.Second
	fail := func() { bs.record("p", false, resultFailure, now, threshold, cooldown) }
	for range 2 {
		fail()
	}
	if _, _, ok := bs.allow("p", now, threshold); !ok {
		t.Fatal("opened before the threshold")
	}
	bs.record("p", false, resultSuccess, now, threshold, cooldown) // success resets the count
	for range 2 {
		fail()
	}
	if _, _, ok := bs.allow("p", now, threshold); !ok {
		t.Fatal("failures are consecutive: a success resets them")
	}
	fail()
	_, retry, ok := bs.allow("p", now, threshold)
	if ok || retry != cooldown {
		t.Fatalf("open: ok %v retry %s", ok, retry)
	}
	now = now.Add(cooldown)
	probe, _, ok := bs.allow("p", now, threshold)
	if !ok || !probe {
		t.Fatal("after the cooldown one probe passes")
	}
	if _, retry, ok := bs.allow("p", now, threshold); ok || retry != halfOpenRetryAfter {
		t.Fatal("only one probe at a time")
	}
	// A probe that tells nothing (cancelled) frees the slot.
	bs.record("p", true, resultNeutral, now, threshold, cooldown)
	probe, _, ok = bs.allow("p", now, threshold)
	if !ok || !probe {
		t.Fatal("the next call probes after a neutral probe")
	}
	bs.record("p", true, resultSuccess, now, threshold, cooldown)
	if st := bs.status(now); st[0].State != BreakerClosed || st[0].TimesOpened != 1 {
		t.Fatalf("status %+v", st)
	}
	if _, _, ok := bs.allow("p", now, 0); !ok {
		t.Fatal("threshold 0 disables the breaker")
	}
}

func TestClassify(t *testing.T) {
	cases := map[error]callResult{
		nil:                                       resultSuccess,
		context.Canceled:                          resultNeutral,
		errors.New("stream consumer: gone"):       resultNeutral,
		&llm.ProviderError{StatusCode: 503}:       resultFailure,
		&llm.ProviderError{StatusCode: 429}:       resultFailure,
		&llm.ProviderError{Unreachable: true}:     resultFailure,
		&llm.ProviderError{StatusCode: 400}:       resultSuccess,
		fmt.Errorf("x: %w", context.Canceled):     resultNeutral,
		fmt.Errorf("w: %w", &llm.ProviderError{}): resultFailure,
	}
	for err, want := range cases {
		if got := classify(err); got != want {
			t.Errorf("classify(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestRejectionStatuses(t *testing.T) {
	for code, want := range map[string]int{CodeBudgetExceeded: 402, CodeNotAllowed: 403, CodeDataClass: 403, CodeRegion: 403,
		CodeUnknownPricing: 403, CodeConfirmationRequired: 409, CodeRateLimited: 429, CodeQuota: 429, CodeProviderTPM: 429,
		CodeProviderBusy: 429, CodeCircuitOpen: 503} {
		r := reject(code, "x")
		if r.Status() != want || !errors.Is(fmt.Errorf("wrapped: %w", r), codeInfo[code].sentinel) {
			t.Errorf("%s: status %d", code, r.Status())
		}
	}
}
