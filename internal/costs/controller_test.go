package costs_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

func wantRejection(t *testing.T, err error, code string, status int, sentinel error) *costs.Rejection {
	t.Helper()
	r, ok := costs.AsRejection(err)
	if !ok {
		t.Fatalf("want a %s rejection, got %v", code, err)
	}
	if r.Code != code || r.Status() != status || !errors.Is(err, sentinel) {
		t.Fatalf("rejection = %s/%d (%v), want %s/%d", r.Code, r.Status(), r, code, status)
	}
	return r
}

func TestRejectionsHappenBeforeProviderAccessAndAreRecorded(t *testing.T) {
	cases := []struct {
		name     string
		mutate   func(*config.Config)
		agents   costs.AgentLookup
		call     *llm.Call
		code     string
		status   int
		sentinel error
	}{
		{name: "workspace provider allowlist",
			mutate: func(c *config.Config) { c.LLM.AllowedProviders = []string{"openai"} },
			call:   call("anthropic", "claude-3-5-haiku", "hi", 10), code: costs.CodeNotAllowed, status: 403, sentinel: costs.ErrNotAllowed},
		{name: "workspace model allowlist",
			mutate: func(c *config.Config) { c.LLM.AllowedModels = []string{"openai/gpt-4o"} },
			call:   call("openai", "gpt-4o-mini", "hi", 10), code: costs.CodeNotAllowed, status: 403, sentinel: costs.ErrNotAllowed},
		{name: "agent model allowlist",
			agents: func(string) (costs.AgentPolicy, bool) {
				return costs.AgentPolicy{AllowedModels: []string{"gpt-4o"}}, true
			},
			call: call("openai", "gpt-4o-mini", "hi", 10), code: costs.CodeNotAllowed, status: 403, sentinel: costs.ErrNotAllowed},
		{name: "region",
			mutate: func(c *config.Config) {
				c.LLM.AllowedRegions = []string{"eu"}
				p := c.LLM.Providers["openai"]
				p.Region = "us"
				c.LLM.Providers["openai"] = p
			},
			call: call("openai", "gpt-4o-mini", "hi", 10), code: costs.CodeRegion, status: 403, sentinel: costs.ErrRegion},
		{name: "provider without region",
			mutate: func(c *config.Config) { c.LLM.AllowedRegions = []string{"eu"} },
			call:   call("anthropic", "claude-3-5-haiku", "hi", 10), code: costs.CodeRegion, status: 403, sentinel: costs.ErrRegion},
		{name: "missing classification is unclassified",
			mutate: func(c *config.Config) {
				p := c.LLM.Providers["openai"]
				p.AllowedDataClasses = []string{"public"}
				c.LLM.Providers["openai"] = p
			},
			call: call("openai", "gpt-4o-mini", "hi", 10), code: costs.CodeDataClass, status: 403, sentinel: costs.ErrDataClass},
		{name: "agent classification",
			mutate: func(c *config.Config) {
				p := c.LLM.Providers["openai"]
				p.AllowedDataClasses = []string{"public", "unclassified"}
				c.LLM.Providers["openai"] = p
			},
			agents: func(string) (costs.AgentPolicy, bool) {
				return costs.AgentPolicy{DataClassification: "restricted"}, true
			},
			call: call("openai", "gpt-4o-mini", "hi", 10), code: costs.CodeDataClass, status: 403, sentinel: costs.ErrDataClass},
		{name: "unknown pricing blocked",
			mutate: func(c *config.Config) { c.Costs.UnknownPricing = "block" },
			call:   call("openai", "gpt-unpriced", "hi", 10), code: costs.CodeUnknownPricing, status: 403, sentinel: costs.ErrUnknownPricing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{agents: tc.agents}, tc.mutate)
			tc.call.Meta.CallID = "call-" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := e.router.Do(context.Background(), tc.call)
			wantRejection(t, err, tc.code, tc.status, tc.sentinel)
			if n := e.fake.CallCount(); n != 0 {
				t.Fatalf("the provider saw %d calls; a rejection must come before any provider access", n)
			}
			row := e.row(tc.call.Meta.CallID)
			if row.Outcome != models.OutcomeRejected || row.RejectionCode != tc.code || row.Subject != "alice" {
				t.Fatalf("ledger row = %+v", row)
			}
		})
	}
}

func TestAllowedCallsPass(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		c.LLM.AllowedRegions = []string{"eu"}
		p := c.LLM.Providers["openai"]
		p.Region, p.AllowedDataClasses = "eu", []string{"public", "unclassified"}
		c.LLM.Providers["openai"] = p
	})
	ctx := context.Background()
	if _, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", "hi", 10)); err != nil {
		t.Fatal(err)
	}
	// A local provider without a region stays in-region.
	if _, err := e.router.Do(ctx, call("ollama", "llama3.2", "hi", 10)); err != nil {
		t.Fatal(err)
	}
}

func TestCacheControlsStrippedOutsideAllowedClasses(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		p := c.LLM.Providers["anthropic"]
		p.PromptCaching = true
		c.LLM.Providers["anthropic"] = p
		c.LLM.CacheAllowedDataClasses = []string{"public"}
	})
	for _, tc := range []struct {
		class string
		want  bool
	}{{"public", true}, {"confidential", false}, {"", false}} {
		c := call("anthropic", "claude-3-5-haiku", "cache "+tc.class, 10)
		c.Request.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: "You are terse."}}, c.Request.Messages...)
		c.Request.PromptCaching = true
		c.Meta.DataClassification = tc.class
		if _, err := e.router.Do(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		calls := e.fake.Calls()
		body := string(calls[len(calls)-1].Body)
		if got := strings.Contains(body, "cache_control"); got != tc.want {
			t.Errorf("class %q: cache_control sent = %v, want %v", tc.class, got, tc.want)
		}
	}
}

// cache_allowed_data_classes is an allow-list: left empty, no class keeps
// provider cache controls even with prompt_caching on (issue 43).
func TestCacheControlsNeedAnAllowedClass(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		p := c.LLM.Providers["anthropic"]
		p.PromptCaching = true
		c.LLM.Providers["anthropic"] = p
	})
	for _, class := range []string{"public", "secret", ""} {
		c := call("anthropic", "claude-3-5-haiku", "cache "+class, 10)
		c.Request.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: "You are terse."}}, c.Request.Messages...)
		c.Request.PromptCaching = true
		c.Meta.DataClassification = class
		if _, err := e.router.Do(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		calls := e.fake.Calls()
		if body := string(calls[len(calls)-1].Body); strings.Contains(body, "cache_control") {
			t.Errorf("class %q: cache_control sent with an empty cache_allowed_data_classes", class)
		}
	}
}

func TestOutputAllowanceDefaultAndCeiling(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		c.Costs.DefaultMaxOutputTokens, c.Costs.MaxOutputTokensCeiling = 200, 500
	})
	for _, tc := range []struct{ asked, sent int }{{0, 200}, {300, 300}, {100000, 500}} {
		c := call("openai", "gpt-4o-mini", fmt.Sprintf("allowance %d", tc.asked), tc.asked)
		if _, err := e.router.Do(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		calls := e.fake.Calls()
		if got := calls[len(calls)-1].MaxTokens; got != tc.sent {
			t.Errorf("asked %d: provider got max_tokens %d, want %d", tc.asked, got, tc.sent)
		}
		row := e.row(c.Meta.CallID)
		if row.MaxOutputTokens != int64(tc.sent) || row.Clamped != (tc.asked > 500) {
			t.Errorf("asked %d: row max_output_tokens %d clamped %v", tc.asked, row.MaxOutputTokens, row.Clamped)
		}
	}
}

func TestConfirmationFlow(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) { c.Costs.ConfirmationThresholdUSD = 0.01 })
	ctx := context.Background()
	// 1000 output tokens at $100/M = $0.10 > $0.01.
	c := call("openai", "gpt-4o-mini", "expensive", 1000)
	c.Meta.Interactive = true
	_, err := e.router.Do(ctx, c)
	r := wantRejection(t, err, costs.CodeConfirmationRequired, http.StatusConflict, costs.ErrConfirmationRequired)
	if r.Estimate == nil || r.Estimate.CostMicros < 100_000 || r.Estimate.OutputTokens != 1000 || r.Estimate.ConfirmationThresholdUSD != 0.01 {
		t.Fatalf("estimate = %+v", r.Estimate)
	}
	if e.fake.CallCount() != 0 {
		t.Fatal("the provider was called before confirmation")
	}
	c = call("openai", "gpt-4o-mini", "expensive", 1000)
	c.Meta.Interactive, c.Meta.ConfirmCost = true, true
	if _, err := e.router.Do(ctx, c); err != nil {
		t.Fatalf("confirmed call: %v", err)
	}
	// Non-interactive surfaces are not asked.
	c = call("openai", "gpt-4o-mini", "batch", 1000)
	if _, err := e.router.Do(ctx, c); err != nil {
		t.Fatalf("non-interactive call: %v", err)
	}
}

// exactConfig prices openai/exact so that 100 output tokens cost exactly
// $0.01 (input free) and makes the fake report exactly 100 output tokens.
func exactConfig(budget float64) func(*config.Config) {
	return func(c *config.Config) {
		c.Costs.EnforcementMode = "hard"
		c.Costs.DailyBudgetUSD = budget
		c.Costs.Pricing["openai/exact"] = config.PriceConfig{InputPerMTok: 0, OutputPerMTok: 100, Source: "test", Version: "x1"}
	}
}

func scriptExact(f *fakellm.Server) {
	f.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 100}})
}

// TestHardBudgetHoldsUnderConcurrency is the concurrency proof at the
// controller level: a $1.00 daily budget, 300 concurrent calls each with a
// worst case (and an actual cost) of exactly $0.01.
func TestHardBudgetHoldsUnderConcurrency(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres", "postgres-two-processes"} {
		t.Run(backend, func(t *testing.T) {
			opts := envOptions{postgres: backend != "sqlite"}
			e := newEnv(t, opts, exactConfig(1.00))
			scriptExact(e.fake)
			envs := []*env{e}
			if backend == "postgres-two-processes" {
				// A second controller with its own clock, limiter, breakers and
				// pool on the same database: a second gateway process.
				envs = append(envs, newEnv(t, envOptions{dsn: e.dsn, fake: e.fake}, exactConfig(1.00)))
			}
			proveBudget(t, envs, 300)
		})
	}
}

func proveBudget(t *testing.T, envs []*env, n int) {
	ctx := context.Background()
	var served, rejected, other atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e := envs[i%len(envs)]
			c := call("openai", "exact", fmt.Sprintf("req %d", i), 100)
			c.Meta.CallID = fmt.Sprintf("proof-%d", i)
			_, err := e.router.Do(ctx, c)
			switch {
			case err == nil:
				served.Add(1)
			case errors.Is(err, costs.ErrBudgetExceeded):
				rejected.Add(1)
			default:
				other.Add(1)
				t.Errorf("call %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, e := range envs {
		if err := e.ctrl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e := envs[0]
	day := e.counter(dayKey(e.clock.Now()))
	rows := e.rows()
	t.Logf("served %d, rejected 402 %d, spent $%.6f, rows %d", served.Load(), rejected.Load(), models.MicrosToUSD(day.SpentMicros), len(rows))
	if served.Load()+rejected.Load() != int64(n) || other.Load() != 0 {
		t.Fatalf("every call must be served or rejected with 402")
	}
	if day.SpentMicros > 1_000_000 {
		t.Fatalf("recorded spend $%.6f passed the $1.00 budget", models.MicrosToUSD(day.SpentMicros))
	}
	if day.SpentMicros != served.Load()*10_000 || served.Load() != 100 {
		t.Fatalf("served %d calls of exactly $0.01 but recorded $%.6f (want exactly 100 served)", served.Load(), models.MicrosToUSD(day.SpentMicros))
	}
	if day.ReservedMicros != 0 || e.reservations().Count != 0 {
		t.Fatalf("reservations left after settle: counter %d, rows %d", day.ReservedMicros, e.reservations().Count)
	}
	if len(rows) != n {
		t.Fatalf("ledger has %d rows for %d calls", len(rows), n)
	}
	var ok, rej int64
	for _, r := range rows {
		switch r.Outcome {
		case models.OutcomeSucceeded:
			ok++
		case models.OutcomeRejected:
			rej++
			if r.RejectionCode != costs.CodeBudgetExceeded {
				t.Fatalf("rejected row with code %q", r.RejectionCode)
			}
		}
	}
	if ok != served.Load() || rej != rejected.Load() {
		t.Fatalf("ledger outcomes %d succeeded / %d rejected, want %d / %d", ok, rej, served.Load(), rejected.Load())
	}
	if got := int64(e.fake.CallCount()); got != served.Load() {
		t.Fatalf("the provider saw %d calls, %d were served", got, served.Load())
	}
}

func TestHardModeClampsOutputToRemainingBudget(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			testClamp(t, newEnv(t, envOptions{postgres: backend == "postgres"}, exactConfig(0.01)))
		})
	}
}

func testClamp(t *testing.T, e *env) {
	// 60 output tokens cost 6000 micros; 4000 are left for the next call.
	e.fake.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 60}})
	ctx := context.Background()
	if _, err := e.router.Do(ctx, call("openai", "exact", "first", 60)); err != nil {
		t.Fatal(err)
	}
	e.fake.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 40}})
	c := call("openai", "exact", "second", 60)
	if _, err := e.router.Do(ctx, c); err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls()
	if got := calls[len(calls)-1].MaxTokens; got != 40 {
		t.Fatalf("second call's max_tokens = %d, want 40 (clamped to the remaining $0.004)", got)
	}
	if row := e.row(c.Meta.CallID); !row.Clamped || row.MaxOutputTokens != 40 || row.ReservedMicros != 4000 {
		t.Fatalf("row = clamped %v max %d reserved %d", row.Clamped, row.MaxOutputTokens, row.ReservedMicros)
	}
	_, err := e.router.Do(ctx, call("openai", "exact", "third", 60))
	r := wantRejection(t, err, costs.CodeBudgetExceeded, http.StatusPaymentRequired, costs.ErrBudgetExceeded)
	if r.Scope != "day" || r.Estimate == nil {
		t.Fatalf("rejection = %+v", r)
	}
	if day := e.counter(dayKey(e.clock.Now())); day.SpentMicros != 10_000 || day.ReservedMicros != 0 {
		t.Fatalf("day counter = %+v", day)
	}
}

func TestOtherBudgetScopes(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(0)(c)
		c.Costs.PerUserDailyBudgetUSD = 0.01
		c.Costs.PerAgentDailyBudgetUSD = 0.02
		c.Costs.MonthlyBudgetUSD = 0.03
	})
	scriptExact(e.fake)
	ctx := context.Background()
	do := func(subject, agent string) error {
		c := call("openai", "exact", subject+agent+fmt.Sprint(time.Now().UnixNano()), 100)
		c.Meta.Subject, c.Meta.AgentID = subject, agent
		_, err := e.router.Do(ctx, c)
		return err
	}
	if err := do("u1", "a1"); err != nil {
		t.Fatal(err)
	}
	r, _ := costs.AsRejection(do("u1", "a1"))
	if r == nil || r.Scope != "user-day" {
		t.Fatalf("want the per-user budget to refuse, got %v", r)
	}
	if err := do("u2", "a1"); err != nil {
		t.Fatal(err)
	}
	r, _ = costs.AsRejection(do("u3", "a1"))
	if r == nil || r.Scope != "agent-day" {
		t.Fatalf("want the per-agent budget to refuse, got %v", r)
	}
	if err := do("u3", "a2"); err != nil {
		t.Fatal(err)
	}
	r, _ = costs.AsRejection(do("u4", "a3"))
	if r == nil || r.Scope != "month" {
		t.Fatalf("want the monthly budget to refuse, got %v", r)
	}
}

func TestSoftModeReservesButNeverRejects(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(0.01)(c)
		c.Costs.EnforcementMode = "soft"
	})
	scriptExact(e.fake)
	for i := range 3 {
		c := call("openai", "exact", fmt.Sprint("soft", i), 100)
		if _, err := e.router.Do(context.Background(), c); err != nil {
			t.Fatalf("soft mode rejected: %v", err)
		}
		if row := e.row(c.Meta.CallID); row.ReservedMicros != 10_000 || row.Mode != "soft" {
			t.Fatalf("row reserved %d mode %s", row.ReservedMicros, row.Mode)
		}
	}
	if day := e.counter(dayKey(e.clock.Now())); day.SpentMicros != 30_000 || day.ReservedMicros != 0 {
		t.Fatalf("day counter = %+v", day)
	}
}

func TestOffModeRecordsWithoutReserving(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(0.01)(c)
		c.Costs.EnforcementMode = "off"
		c.RateLimit.Enabled, c.RateLimit.PerUserTokensDay = true, 1
	})
	scriptExact(e.fake)
	for i := range 2 {
		c := call("openai", "exact", fmt.Sprint("off", i), 100)
		if _, err := e.router.Do(context.Background(), c); err != nil {
			t.Fatalf("off mode rejected: %v", err)
		}
		row := e.row(c.Meta.CallID)
		if row.Outcome != models.OutcomeSucceeded || row.CostMicros != 10_000 || row.CostUSD != 0.01 {
			t.Fatalf("row = %+v", row)
		}
	}
	if e.reservations().Count != 0 {
		t.Fatal("off mode reserved")
	}
	if day := e.counter(dayKey(e.clock.Now())); day.SpentMicros != 20_000 {
		t.Fatalf("off mode must still count spend: %+v", day)
	}
}

func TestSameCallIDStaysOnOneRow(t *testing.T) {
	e := newEnv(t, envOptions{}, exactConfig(1))
	scriptExact(e.fake)
	ctx := context.Background()
	for range 2 { // a retried Temporal activity re-using its call id
		c := call("openai", "exact", "again", 100)
		c.Meta.CallID = "activity-call-1"
		if _, err := e.router.Do(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	rows := e.rows()
	if len(rows) != 1 {
		t.Fatalf("%d rows for one call id", len(rows))
	}
	r := rows[0]
	// Two provider requests really happened (and are billed): both are on
	// the one row, and each settlement was applied once.
	if r.Executions != 2 || r.Attempts != 2 || r.CostMicros != 20_000 || r.Outcome != models.OutcomeSucceeded {
		t.Fatalf("row = executions %d attempts %d cost %d outcome %s", r.Executions, r.Attempts, r.CostMicros, r.Outcome)
	}
	if strings.Count(r.ProviderRequestIDs, ",") != 1 {
		t.Fatalf("provider request ids = %q", r.ProviderRequestIDs)
	}

	// Settling one admission twice changes nothing the second time.
	c := call("openai", "exact", "twice", 100)
	c.Meta.CallID = "settle-twice"
	adm, err := e.ctrl.Admit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	resp := &llm.Response{Usage: llm.Usage{InputTokens: 10, OutputTokens: 100}, UsageReported: true}
	adm.Settle(ctx, resp, nil, 1)
	adm.Settle(ctx, resp, nil, 1)
	if row := e.row("settle-twice"); row.Attempts != 1 || row.CostMicros != 10_000 {
		t.Fatalf("settled twice: attempts %d cost %d", row.Attempts, row.CostMicros)
	}
	if day := e.counter(dayKey(e.clock.Now())); day.ReservedMicros != 0 || day.SpentMicros != 30_000 {
		t.Fatalf("day counter = %+v", day)
	}
}

func TestRetryStaysOnOneRow(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		p := c.LLM.Providers["openai"]
		p.MaxRetries = 2
		c.LLM.Providers["openai"] = p
	})
	e.fake.Script(fakellm.Rule{Contains: "retry", Times: 1, Status: 429, RetryAfter: "1", Message: "slow down"})
	c := call("openai", "gpt-4o-mini", "retry me", 50)
	if _, err := e.router.Do(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	rows := e.rows()
	if len(rows) != 1 || rows[0].Attempts != 2 || rows[0].Outcome != models.OutcomeSucceeded || rows[0].UsageEstimated {
		t.Fatalf("rows = %+v", rows)
	}
	st, err := e.ctrl.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Retries.RetryAttempts != 1 || st.Retries.RetriedCalls != 1 || st.Retries.Attempts != 2 {
		t.Fatalf("status retries = %+v", st.Retries)
	}
}

func TestCutAndCancelledStreamsAreSettledWithAnEstimate(t *testing.T) {
	e := newEnv(t, envOptions{}, nil)
	e.fake.Script(
		fakellm.Rule{Contains: "cut", Reply: "one two three four five six seven eight", Chunks: 8, CutAfterChunks: 2},
		fakellm.Rule{Contains: "slow", Reply: "a b c d e f g h i j k l m n o p", Chunks: 16, ChunkDelay: fakellm.Duration(50 * time.Millisecond)},
	)
	ctx := context.Background()

	c := call("openai", "gpt-4o-mini", "cut please", 100)
	c.Stream = true
	resp, err := e.router.Do(ctx, c)
	if err == nil || resp == nil || resp.Content == "" {
		t.Fatalf("cut stream: resp %+v err %v", resp, err)
	}
	row := e.row(c.Meta.CallID)
	if row.Outcome != models.OutcomeIncomplete || !row.UsageEstimated || row.InputTokens <= 0 || row.OutputTokens <= 0 || row.CostMicros <= 0 {
		t.Fatalf("cut stream row = %+v", row)
	}

	c = call("openai", "gpt-4o-mini", "slow please", 100)
	c.Stream = true
	chunks := 0
	c.OnDelta = func(string) error {
		chunks++
		if chunks == 2 {
			return errors.New("client went away")
		}
		return nil
	}
	if _, err := e.router.Do(ctx, c); err == nil {
		t.Fatal("a stream whose consumer failed must fail")
	}
	row = e.row(c.Meta.CallID)
	if row.Outcome != models.OutcomeCancelled || !row.UsageEstimated || row.OutputTokens <= 0 || row.CostMicros <= 0 {
		t.Fatalf("cancelled stream row = %+v", row)
	}

	cctx, cancel := context.WithCancel(ctx)
	c = call("openai", "gpt-4o-mini", "slow again", 100)
	c.Stream = true
	c.OnDelta = func(string) error { cancel(); return nil }
	if _, err := e.router.Do(cctx, c); err == nil {
		t.Fatal("a cancelled stream must fail")
	}
	row = e.row(c.Meta.CallID)
	if row.Outcome != models.OutcomeCancelled || !row.UsageEstimated || row.InputTokens <= 0 {
		t.Fatalf("context-cancelled stream row = %+v", row)
	}
	if e.reservations().Count != 0 {
		t.Fatal("a reservation was left behind")
	}
}

func TestProviderTPMClampsThenRejects(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		p := c.LLM.Providers["openai"]
		p.MaxTokensPerMinute = 1000
		c.LLM.Providers["openai"] = p
	})
	e.fake.Script(fakellm.Rule{Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 800}})
	ctx := context.Background()
	if _, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", "a", 800)); err != nil {
		t.Fatal(err)
	}
	// 810 tokens used: 190 left, less the prompt estimate, for the output.
	c := call("openai", "gpt-4o-mini", "b", 800)
	if _, err := e.router.Do(ctx, c); err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls()
	got := calls[len(calls)-1].MaxTokens
	if got <= 0 || got >= 190 {
		t.Fatalf("second call's max_tokens = %d, want it clamped below 190", got)
	}
	if row := e.row(c.Meta.CallID); !row.Clamped {
		t.Fatal("row not marked clamped")
	}
	_, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", "c", 800))
	r := wantRejection(t, err, costs.CodeProviderTPM, http.StatusTooManyRequests, costs.ErrProviderTPM)
	if r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
		t.Fatalf("retry after %s", r.RetryAfter)
	}
	before := e.fake.CallCount()
	e.clock.Advance(61 * time.Second)
	if _, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", "d", 800)); err != nil {
		t.Fatalf("after a minute: %v", err)
	}
	if e.fake.CallCount() != before+1 {
		t.Fatal("call not sent")
	}
}

func TestRateLimitsAndQuotas(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		c.RateLimit.Enabled, c.RateLimit.PerUserRPM = true, 2
		c.RateLimit.PerAgentTokensDay = 2000
	})
	ctx := context.Background()
	run := func(runID string, maxTokens int) error {
		c := call("openai", "gpt-4o-mini", runID, maxTokens)
		c.Meta.RunID, c.Meta.CallID = runID, ""
		_, err := e.router.Do(ctx, c)
		return err
	}
	if err := run("r1", 10); err != nil {
		t.Fatal(err)
	}
	if err := run("r1", 10); err != nil { // the same run counts once
		t.Fatal(err)
	}
	if err := run("r2", 10); err != nil {
		t.Fatal(err)
	}
	r := wantRejection(t, run("r3", 10), costs.CodeRateLimited, http.StatusTooManyRequests, costs.ErrRateLimited)
	if r.RetryAfter <= 0 {
		t.Fatal("no Retry-After")
	}
	e.clock.Advance(time.Minute + time.Second)
	// The agent's token quota: 3 small calls used ~ 3 x (prompt + reply);
	// a call asking for 5000 output tokens cannot fit in 2000 a day.
	wantRejection(t, run("r4", 5000), costs.CodeQuota, http.StatusTooManyRequests, costs.ErrQuota)
	if err := run("r5", 10); err != nil {
		t.Fatalf("a small call must still fit (the refused call's entries were released): %v", err)
	}
	e.clock.Advance(25 * time.Hour)
	if err := run("r6", 1500); err != nil {
		t.Fatalf("after 24 hours: %v", err)
	}
}

func TestBreakerOpensHalfOpensWithOneProbeAndCloses(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		c.Costs.CircuitFailureThreshold, c.Costs.CircuitCooldown = 2, 30*time.Second
	})
	e.fake.Script(fakellm.Rule{Contains: "boom", Status: 503, Message: "overloaded"})
	ctx := context.Background()
	for i := range 2 {
		if _, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", fmt.Sprint("boom", i), 10)); err == nil {
			t.Fatal("want a provider error")
		}
	}
	seen := e.fake.CallCount()
	_, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", "hello", 10))
	r := wantRejection(t, err, costs.CodeCircuitOpen, http.StatusServiceUnavailable, costs.ErrCircuitOpen)
	if r.RetryAfter <= 0 || r.RetryAfter > 30*time.Second {
		t.Fatalf("retry after %s", r.RetryAfter)
	}
	if e.fake.CallCount() != seen {
		t.Fatal("an open circuit sent a call upstream")
	}
	// Other providers are not affected.
	if _, err := e.router.Do(ctx, call("anthropic", "claude-3-5-haiku", "hello", 10)); err != nil {
		t.Fatal(err)
	}

	e.clock.Advance(31 * time.Second)
	probe, err := e.ctrl.Admit(ctx, call("openai", "gpt-4o-mini", "probe", 10))
	if err != nil {
		t.Fatalf("after the cooldown one probe must pass: %v", err)
	}
	_, err = e.ctrl.Admit(ctx, call("openai", "gpt-4o-mini", "second", 10))
	wantRejection(t, err, costs.CodeCircuitOpen, http.StatusServiceUnavailable, costs.ErrCircuitOpen)
	// A failed probe opens the circuit again.
	probe.Settle(ctx, nil, &llm.ProviderError{Provider: "openai", StatusCode: 503}, 1)
	_, err = e.ctrl.Admit(ctx, call("openai", "gpt-4o-mini", "third", 10))
	wantRejection(t, err, costs.CodeCircuitOpen, http.StatusServiceUnavailable, costs.ErrCircuitOpen)

	e.clock.Advance(31 * time.Second)
	if _, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", "probe ok", 10)); err != nil {
		t.Fatalf("probe: %v", err)
	}
	for i := range 3 {
		if _, err := e.router.Do(ctx, call("openai", "gpt-4o-mini", fmt.Sprint("closed", i), 10)); err != nil {
			t.Fatalf("closed circuit: %v", err)
		}
	}
	st, _ := e.ctrl.Status(ctx)
	for _, b := range st.Breakers {
		if b.Provider == "openai" && (b.State != costs.BreakerClosed || b.TimesOpened != 2) {
			t.Fatalf("breaker status = %+v", b)
		}
	}
}

func TestConcurrencyLimitPerProvider(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) { c.Costs.MaxConcurrentPerProvider = 1 })
	ctx := context.Background()
	first, err := e.ctrl.Admit(ctx, call("openai", "gpt-4o-mini", "one", 10))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = e.ctrl.Admit(short, call("openai", "gpt-4o-mini", "two", 10))
	wantRejection(t, err, costs.CodeProviderBusy, http.StatusTooManyRequests, costs.ErrProviderBusy)
	first.Settle(ctx, &llm.Response{UsageReported: true}, nil, 1)
	second, err := e.ctrl.Admit(ctx, call("openai", "gpt-4o-mini", "three", 10))
	if err != nil {
		t.Fatalf("slot not given back: %v", err)
	}
	second.Settle(ctx, &llm.Response{UsageReported: true}, nil, 1)
}

// A call whose reservation lapses unsettled (a crash mid-call) may have
// reached the provider: it is priced at its worst case, which stays spent
// until a late settlement replaces it with the real cost.
func TestReaperPricesUnsettledCallsAtWorstCaseOnce(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(1)(c)
		c.Costs.ReservationTTL = time.Minute
	})
	ctx := context.Background()
	c := call("openai", "exact", "crash", 100)
	c.Meta.CallID = "crashed"
	adm, err := e.ctrl.Admit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	key := dayKey(e.clock.Now())
	if got := e.counter(key).ReservedMicros; got != 10_000 {
		t.Fatalf("reserved %d", got)
	}
	if n, err := e.ctrl.ReapOnce(ctx); err != nil || n != 0 {
		t.Fatalf("reaped %d before expiry (%v)", n, err)
	}
	e.clock.Advance(2 * time.Minute)
	if n, err := e.ctrl.ReapOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d, err %v", n, err)
	}
	if got := e.counter(key); got.ReservedMicros != 0 || got.SpentMicros != 10_000 {
		t.Fatalf("counter after reaping = %+v", got)
	}
	if row := e.row("crashed"); row.Outcome != models.OutcomeUnsettled || row.PricingStatus != models.PricingEstimated || row.CostMicros != 10_000 {
		t.Fatalf("row after reaping = %+v", row)
	}
	if n, err := e.ctrl.ReapOnce(ctx); err != nil || n != 0 {
		t.Fatalf("reaped again: %d (%v)", n, err)
	}
	// The call settles after all, having used half its allowance: the real
	// cost replaces the estimate; the reservation is not released again.
	adm.Settle(ctx, &llm.Response{Usage: llm.Usage{OutputTokens: 50}, UsageReported: true}, nil, 1)
	if got := e.counter(key); got.ReservedMicros != 0 || got.SpentMicros != 5_000 {
		t.Fatalf("counter after the late settle = %+v", got)
	}
	if row := e.row("crashed"); row.Outcome != models.OutcomeSucceeded || row.PricingStatus != models.PricingPriced || row.CostMicros != 5_000 {
		t.Fatalf("row after the late settle = %+v", row)
	}
}

func TestBudgetAlertRaisedOnce(t *testing.T) {
	var mu sync.Mutex
	var alerts []costs.Alert
	e := newEnv(t, envOptions{alerts: func(a costs.Alert) { mu.Lock(); alerts = append(alerts, a); mu.Unlock() }}, func(c *config.Config) {
		exactConfig(0.05)(c)
		c.Costs.AlertThreshold = 0.5
	})
	scriptExact(e.fake)
	for i := range 4 {
		if _, err := e.router.Do(context.Background(), call("openai", "exact", fmt.Sprint("alert", i), 100)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(alerts) != 1 || alerts[0].Scope != "day" || alerts[0].Fraction < 0.5 {
		t.Fatalf("alerts = %+v", alerts)
	}
	ev := alerts[0].Event()
	if ev.Type != costs.AlertEventType || !strings.Contains(ev.DedupeKey, "day:") {
		t.Fatalf("event = %+v", ev)
	}
	st, err := e.ctrl.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Periods.Day.Alert {
		t.Fatal("status does not flag the alert")
	}
}

func TestPriceInEffectAtCallTime(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		c.Costs.UnknownPricing = "block"
		tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
		c.Costs.Pricing["openai/future"] = config.PriceConfig{InputPerMTok: 1, OutputPerMTok: 1, EffectiveDate: tomorrow, Version: "f1"}
	})
	ctx := context.Background()
	_, err := e.router.Do(ctx, call("openai", "future", "now", 10))
	wantRejection(t, err, costs.CodeUnknownPricing, http.StatusForbidden, costs.ErrUnknownPricing)
	e.clock.Advance(48 * time.Hour)
	c := call("openai", "future", "later", 10)
	if _, err := e.router.Do(ctx, c); err != nil {
		t.Fatal(err)
	}
	if row := e.row(c.Meta.CallID); row.PriceVersion != "f1" || row.PricingStatus != models.PricingPriced {
		t.Fatalf("row price = %s %s", row.PricingStatus, row.PriceVersion)
	}
}

// By default (issue 43) an unpriced cloud model is refused before the
// provider is reached, while a local runtime's unpriced model runs at $0;
// /costs/status says which models the policy refuses.
func TestUnknownPricingBlocksCloudByDefault(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		p := c.LLM.Providers["openai"]
		p.Models = []string{"gpt-unpriced"}
		c.LLM.Providers["openai"] = p
	})
	ctx := context.Background()
	before := len(e.fake.Calls())
	_, err := e.router.Do(ctx, call("openai", "gpt-unpriced", "x", 10))
	wantRejection(t, err, costs.CodeUnknownPricing, http.StatusForbidden, costs.ErrUnknownPricing)
	if n := len(e.fake.Calls()); n != before {
		t.Fatalf("a refused unpriced call reached the provider (%d calls)", n-before)
	}
	local := call("ollama", "llama3.2", "x", 10)
	if _, err := e.router.Do(ctx, local); err != nil {
		t.Fatalf("local unpriced model refused: %v", err)
	}
	if row := e.row(local.Meta.CallID); row.CostMicros != 0 {
		t.Fatalf("local row = %+v", row)
	}
	st, err := e.ctrl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pc := st.PricingCoverage
	if pc.UnknownPricing != "block" || !slices.Contains(pc.Blocked, "openai/gpt-unpriced") || slices.Contains(pc.Blocked, "ollama/llama3.2") ||
		!slices.Contains(pc.Unpriced, "ollama/llama3.2") {
		t.Fatalf("pricing coverage = %+v", pc)
	}
}

func TestUnknownPricingAllowedIsRecorded(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) { c.Costs.UnknownPricing = "allow" })
	c := call("openai", "gpt-unpriced", "x", 10)
	if _, err := e.router.Do(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if row := e.row(c.Meta.CallID); row.PricingStatus != models.PricingUnknown || row.CostMicros != 0 {
		t.Fatalf("row = %+v", row)
	}
	st, _ := e.ctrl.Status(context.Background())
	if st.UnknownPricedCalls != 1 || st.PricingCoverage.Percent >= 100 || len(st.PricingCoverage.Unpriced) == 0 {
		t.Fatalf("status = unknown %d coverage %+v", st.UnknownPricedCalls, st.PricingCoverage)
	}
}

func TestStatusAttributionAndChargeback(t *testing.T) {
	e := newEnv(t, envOptions{}, exactConfig(1))
	scriptExact(e.fake)
	ctx := context.Background()
	for i, who := range []string{"alice", "alice", "bob"} {
		c := call("openai", "exact", fmt.Sprint("cb", i), 100)
		c.Meta.Subject = who
		if _, err := e.router.Do(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	st, err := e.ctrl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "ready" || st.Attribution.Percent != 100 || st.Periods.Day.SpendMicros != 30_000 || st.EnforcementMode != "hard" ||
		st.Periods.Day.BudgetUSD != 1 || st.Forecast.MonthEndSpendMicros < 30_000 || st.Reconciliation.Status != "disabled" {
		t.Fatalf("status = %+v", st)
	}
	rows, err := e.ctrl.Chargeback(ctx, costs.ChargebackQuery{GroupBy: []string{"user", "model"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Group["user"] != "alice" || rows[0].CostMicros != 20_000 || rows[0].Calls != 2 || rows[1].Group["model"] != "exact" {
		t.Fatalf("chargeback = %+v", rows)
	}
	if _, err := costs.ParseGroupBy("user,colour"); err == nil || !strings.Contains(err.Error(), `"colour"`) {
		t.Fatalf("unknown dimension: %v", err)
	}

	// A call without a subject cannot be attributed: readiness fails.
	c := call("openai", "exact", "anon", 100)
	c.Meta.Subject = ""
	if _, err := e.router.Do(ctx, c); err != nil {
		t.Fatal(err)
	}
	st, _ = e.ctrl.Status(ctx)
	if st.Status != "degraded" || st.Attribution.Percent >= 100 || len(st.Problems) == 0 {
		t.Fatalf("status = %s attribution %v problems %v", st.Status, st.Attribution, st.Problems)
	}
}

func TestEstimate(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(0.05)(c)
		c.Costs.ConfirmationThresholdUSD = 0.001
	})
	ctx := context.Background()
	out := int64(100)
	res, err := e.ctrl.Estimate(ctx, "alice", costs.EstimateRequest{Provider: "openai", Model: "exact", InputTokens: 1000, OutputTokens: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.CostMicros != 10_000 || !res.ConfirmationRequired || res.WouldAdmit || res.Rejection.Code != costs.CodeConfirmationRequired {
		t.Fatalf("estimate = %+v", res)
	}
	res, err = e.ctrl.Estimate(ctx, "alice", costs.EstimateRequest{Provider: "openai", Model: "exact", InputTokens: 1000, OutputTokens: &out, ConfirmCost: true})
	if err != nil || !res.WouldAdmit {
		t.Fatalf("confirmed estimate = %+v, %v", res, err)
	}
	big := int64(1000)
	res, _ = e.ctrl.Estimate(ctx, "alice", costs.EstimateRequest{Provider: "openai", Model: "exact", OutputTokens: &big, ConfirmCost: true})
	if !res.WouldAdmit || !strings.Contains(checkMsg(res, "budget"), "clamped") {
		t.Fatalf("a call over the budget in hard mode would be clamped: %+v", res.Checks)
	}
	for _, bad := range []costs.EstimateRequest{{InputTokens: -1}, {OutputTokens: ptr(int64(-5))}, {InputTokens: 1, CachedInputTokens: 2}, {Provider: "nope"}} {
		if _, err := e.ctrl.Estimate(ctx, "alice", bad); !errors.As(err, new(*fault.Invalid)) {
			t.Fatalf("%+v: want an input error, got %v", bad, err)
		}
	}
	if e.fake.CallCount() != 0 || len(e.rows()) != 0 {
		t.Fatal("an estimate must not call the provider or write the ledger")
	}
}

func checkMsg(r *costs.EstimateResult, name string) string {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Message
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

func TestBuilderAllowancePerBuild(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(0)(c)
		c.LLM.Studio.MaxBuildCostUSD = 0.015
		c.LLM.Studio.MaxBuildTokens = 1000
	})
	scriptExact(e.fake)
	ctx := context.Background()
	build := func(run string, maxTokens int) error {
		c := call("openai", "exact", run+fmt.Sprint(time.Now().UnixNano()), maxTokens)
		c.Meta.Source, c.Meta.RunID = llm.SourceBuilder, run
		_, err := e.router.Do(ctx, c)
		return err
	}
	if err := build("b1", 100); err != nil {
		t.Fatal(err)
	}
	// $0.005 left of b1's allowance: the next call is clamped to 50 tokens.
	e.fake.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 50}})
	if err := build("b1", 100); err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls()
	if got := calls[len(calls)-1].MaxTokens; got != 50 {
		t.Fatalf("clamped to %d tokens, want 50", got)
	}
	r, _ := costs.AsRejection(build("b1", 100))
	if r == nil || r.Code != costs.CodeBudgetExceeded || r.Scope != "build" {
		t.Fatalf("want the build allowance to refuse, got %v", r)
	}
	// Another build has its own allowance.
	if err := build("b2", 100); err != nil {
		t.Fatal(err)
	}
}

func TestBuilderTokenAllowance(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) { c.LLM.Studio.MaxBuildTokens = 1000 })
	e.fake.Script(fakellm.Rule{Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 900}})
	ctx := context.Background()
	build := func(run string, maxTokens int) (*llm.Call, error) {
		c := call("openai", "gpt-4o-mini", run+fmt.Sprint(time.Now().UnixNano()), maxTokens)
		c.Meta.Source, c.Meta.RunID = llm.SourceBuilder, run
		_, err := e.router.Do(ctx, c)
		return c, err
	}
	if _, err := build("b1", 900); err != nil {
		t.Fatal(err)
	}
	// 910 of 1000 tokens used: the next call is clamped to what is left.
	c, err := build("b1", 900)
	if err != nil {
		t.Fatal(err)
	}
	if row := e.row(c.Meta.CallID); !row.Clamped || row.MaxOutputTokens >= 90 {
		t.Fatalf("row = clamped %v max %d", row.Clamped, row.MaxOutputTokens)
	}
	_, err = build("b1", 900)
	r := wantRejection(t, err, costs.CodeBudgetExceeded, http.StatusPaymentRequired, costs.ErrBudgetExceeded)
	if r.Scope != "build_tokens" {
		t.Fatalf("scope %s", r.Scope)
	}
	if row := e.rows(); len(row) != 3 {
		t.Fatalf("%d rows", len(row))
	}
	if _, err := build("b2", 900); err != nil {
		t.Fatalf("another build: %v", err)
	}
}

func TestMonthlyBudgetCountsEarlierDays(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(0)(c)
		c.Costs.MonthlyBudgetUSD = 0.03
		c.Costs.AlertThreshold = 0.9
	})
	e.clock.mu.Lock()
	e.clock.t = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	e.clock.mu.Unlock()
	scriptExact(e.fake)
	ctx := context.Background()
	do := func(text string) error {
		_, err := e.router.Do(ctx, call("openai", "exact", text, 100))
		return err
	}
	for _, text := range []string{"m1", "m2"} {
		if err := do(text); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(24 * time.Hour) // the 11th: $0.02 of the month is on the 10th's counter
	if err := do("m3"); err != nil {
		t.Fatal(err)
	}
	r, _ := costs.AsRejection(do("m4"))
	if r == nil || r.Scope != "month" {
		t.Fatalf("want the monthly budget to refuse, got %v", r)
	}
	st, err := e.ctrl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Periods.Month.SpendMicros != 30_000 || st.Periods.Day.SpendMicros != 10_000 || !st.Periods.Month.Alert {
		t.Fatalf("periods = %+v", st.Periods)
	}
	e.clock.Advance(21 * 24 * time.Hour) // April: a new month
	if err := do("m5"); err != nil {
		t.Fatalf("a new month: %v", err)
	}
}
