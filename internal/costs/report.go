package costs

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

func badInput(field, format string, args ...any) error {
	return &fault.Invalid{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Estimate is the worst-case cost of a call: input tokens plus the output
// allowance, at the price in effect now.
type Estimate struct {
	Provider                 string     `json:"provider"`
	Model                    string     `json:"model"`
	InputTokens              int64      `json:"input_tokens"`
	CachedInputTokens        int64      `json:"cached_input_tokens"`
	OutputTokens             int64      `json:"output_tokens"`
	CostMicros               int64      `json:"cost_micros"`
	CostUSD                  float64    `json:"cost_usd"`
	PricingStatus            string     `json:"pricing_status"`
	Price                    *PriceInfo `json:"price,omitempty"`
	ConfirmationThresholdUSD float64    `json:"confirmation_threshold_usd,omitempty"`
}

// EstimateRequest is POST /costs/estimate: token counts in, no prompt.
type EstimateRequest struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	AgentID  string `json:"agent_id"`
	// InputTokens counts all prompt tokens, CachedInputTokens the part read
	// from the provider's cache. OutputTokens is the output allowance
	// (max_tokens); nil means default_max_output_tokens.
	InputTokens        int64  `json:"input_tokens"`
	CachedInputTokens  int64  `json:"cached_input_tokens"`
	OutputTokens       *int64 `json:"output_tokens"`
	DataClassification string `json:"data_classification"`
	// Interactive (default true) applies the confirmation threshold.
	Interactive *bool `json:"interactive"`
	ConfirmCost bool  `json:"confirm_cost"`
}

// CheckResult is one admission check of an estimate.
type CheckResult struct {
	Name              string `json:"name"`
	OK                bool   `json:"ok"`
	Code              string `json:"code,omitempty"`
	Status            int    `json:"status,omitempty"`
	Message           string `json:"message,omitempty"`
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
}

// EstimateResult answers POST /costs/estimate.
type EstimateResult struct {
	Estimate
	EnforcementMode      string `json:"enforcement_mode"`
	ConfirmationRequired bool   `json:"confirmation_required"`
	Confirmed            bool   `json:"confirmed"`
	// WouldAdmit is false when a check would reject the call now;
	// Rejection is the first such check (the one admission would answer).
	WouldAdmit bool          `json:"would_admit"`
	Rejection  *CheckResult  `json:"rejection,omitempty"`
	Checks     []CheckResult `json:"checks"`
}

// Estimate prices a call from token counts and runs admission's checks
// without side effects (nothing is taken, reserved or recorded). subject is
// the caller, for the per-user limits.
func (c *Controller) Estimate(ctx context.Context, subject string, req EstimateRequest) (*EstimateResult, error) {
	p := c.pol.Load()
	now := c.now().UTC()
	switch {
	case req.InputTokens < 0:
		return nil, badInput("input_tokens", "must not be negative")
	case req.CachedInputTokens < 0:
		return nil, badInput("cached_input_tokens", "must not be negative")
	case req.OutputTokens != nil && *req.OutputTokens < 0:
		return nil, badInput("output_tokens", "must not be negative")
	case req.CachedInputTokens > req.InputTokens:
		return nil, badInput("cached_input_tokens", "must not exceed input_tokens (input counts cached tokens too)")
	}
	var agent *AgentPolicy
	if req.AgentID != "" {
		if c.agents == nil {
			return nil, badInput("agent_id", "unknown agent %q", req.AgentID)
		}
		ap, ok := c.agents(req.AgentID)
		if !ok {
			return nil, badInput("agent_id", "unknown agent %q", req.AgentID)
		}
		agent = &ap
	}
	provider, model := req.Provider, req.Model
	if provider == "" && agent != nil {
		provider = agent.Provider
	}
	if provider == "" {
		provider = p.defaultProvider
	}
	pc, ok := p.providers[provider]
	if !ok {
		return nil, badInput("provider", "unknown provider %q", provider)
	}
	if model == "" && agent != nil && (agent.Provider == "" || agent.Provider == provider) {
		model = agent.Model
	}
	if model == "" {
		model = pc.DefaultModel
	}
	if model == "" && len(pc.Models) > 0 {
		model = pc.Models[0]
	}
	if model == "" {
		return nil, badInput("model", "is required (provider %s has no default_model)", provider)
	}

	res := &EstimateResult{EnforcementMode: p.mode, WouldAdmit: true, Confirmed: req.ConfirmCost}
	add := func(name string, r *Rejection, okMsg string) {
		cr := CheckResult{Name: name, OK: r == nil, Message: okMsg}
		if r != nil {
			cr.Code, cr.Status, cr.Message = r.Code, r.Status(), r.Message
			if r.RetryAfter > 0 {
				cr.RetryAfterSeconds = int(math.Ceil(r.RetryAfter.Seconds()))
			}
			if res.WouldAdmit {
				res.WouldAdmit = false
				first := cr
				res.Rejection = &first
			}
		}
		res.Checks = append(res.Checks, cr)
	}

	requested := 0
	if req.OutputTokens != nil {
		requested = int(min(*req.OutputTokens, math.MaxInt32))
	}
	allowance, clamped := p.outputAllowance(requested)
	msg := fmt.Sprintf("output allowance %d tokens", allowance)
	if clamped {
		msg += " (clamped to costs.max_output_tokens_ceiling)"
	}
	add("output_allowance", nil, msg)
	add("allowlist", p.checkAllowlists(provider, model, agent), "")
	add("region", p.checkRegion(provider), "")
	class := req.DataClassification
	if class == "" {
		class = dataClass(llm.CallMeta{}, agent)
	}
	add("data_class", p.checkDataClass(provider, class), "data classification "+class)
	if p.cachingAllowed(provider, class) {
		add("cache", nil, "provider cache controls allowed")
	} else {
		add("cache", nil, "provider cache controls would be removed")
	}

	price, priced := p.prices.Lookup(provider, model, now)
	maxOut := int64(allowance)
	usage := llm.Usage{InputTokens: req.InputTokens, CachedInputTokens: req.CachedInputTokens, OutputTokens: maxOut}
	est := Estimate{Provider: provider, Model: model, InputTokens: req.InputTokens, CachedInputTokens: req.CachedInputTokens,
		OutputTokens: maxOut, PricingStatus: models.PricingUnknown}
	if p.confirmMicros > 0 {
		est.ConfirmationThresholdUSD = models.MicrosToUSD(p.confirmMicros)
	}
	if priced {
		est.PricingStatus, est.Price, est.CostMicros = models.PricingPriced, price.Info(), price.Cost(usage)
		add("pricing", nil, fmt.Sprintf("price version %q from %s", price.Version, orDash(price.EffectiveDate)))
	} else if p.blocksUnpriced(provider) {
		add("pricing", reject(CodeUnknownPricing, "model %s/%s has no price in costs.pricing and costs.unknown_pricing is block", provider, model), "")
	} else {
		add("pricing", nil, "no price configured: the call would be recorded with pricing_status unknown")
	}
	est.CostUSD = models.MicrosToUSD(est.CostMicros)
	res.Estimate = est

	interactive := req.Interactive == nil || *req.Interactive
	res.ConfirmationRequired = interactive && p.confirmMicros > 0 && est.CostMicros > p.confirmMicros
	if res.ConfirmationRequired && !req.ConfirmCost {
		r := reject(CodeConfirmationRequired, "estimated cost $%.6f is above the confirmation threshold of $%.6f; set confirm_cost to true",
			est.CostUSD, models.MicrosToUSD(p.confirmMicros))
		add("confirmation", r, "")
	} else {
		add("confirmation", nil, "")
	}

	want := req.InputTokens + maxOut
	minWant := req.InputTokens + min(maxOut, c.minOutput)
	rl := p.rate
	if rl.Enabled && rl.PerUserRPM > 0 {
		used, err := c.limiter.Used(ctx, "rpm:user:"+subject, minuteWindow)
		if err != nil {
			return nil, err
		}
		var r *Rejection
		if used >= int64(rl.PerUserRPM) {
			r = reject(CodeRateLimited, "rate limit of %d requests per minute reached for %s", rl.PerUserRPM, displaySubject(subject))
			r.RetryAfter = time.Second
		}
		add("rate_limit", r, fmt.Sprintf("%d of %d requests in the last minute", used, rl.PerUserRPM))
	}
	if rl.Enabled && p.mode != ModeOff {
		type quota struct {
			name, key string
			limit     int64
		}
		quotas := []quota{{"quota_user", "tok:user:" + subject, rl.PerUserTokensDay}}
		if req.AgentID != "" {
			quotas = append(quotas, quota{"quota_agent", "tok:agent:" + req.AgentID, rl.PerAgentTokensDay})
		}
		for _, q := range quotas {
			if q.limit <= 0 {
				continue
			}
			used, err := c.limiter.Used(ctx, q.key, dayWindow)
			if err != nil {
				return nil, err
			}
			var r *Rejection
			if used+want > q.limit {
				r = reject(CodeQuota, "token quota: %d of %d tokens used in the last 24 hours, this call needs %d", used, q.limit, want)
			}
			add(q.name, r, fmt.Sprintf("%d of %d tokens used in the last 24 hours", used, q.limit))
		}
	}
	if tpm := int64(pc.MaxTokensPerMinute); tpm > 0 {
		used, err := c.limiter.Used(ctx, "tpm:provider:"+provider, minuteWindow)
		if err != nil {
			return nil, err
		}
		free := tpm - used
		var r *Rejection
		msg := fmt.Sprintf("%d of %d tokens used in the last minute", used, tpm)
		switch {
		case free < minWant:
			r = reject(CodeProviderTPM, "provider %s tokens-per-minute limit (%d) has no room for this call now", provider, tpm)
			r.RetryAfter = time.Second
		case free < want:
			msg += fmt.Sprintf("; the output allowance would be clamped to %d tokens", free-req.InputTokens)
		}
		add("provider_tpm", r, msg)
	}
	if p.maxConcurrent > 0 {
		add("provider_concurrency", nil, fmt.Sprintf("%d of %d calls in flight in this process", c.slots.inUse(provider), p.maxConcurrent))
	}
	if retry, ok := c.breakers.peek(provider, now, p.failureThreshold); ok {
		add("circuit_breaker", nil, "")
	} else {
		r := reject(CodeCircuitOpen, "provider %s is failing; calls are paused (circuit open)", provider)
		r.RetryAfter = retry
		add("circuit_breaker", r, "")
	}
	if err := c.addBudgetCheck(ctx, p, now, subject, req.AgentID, price, req.InputTokens, maxOut, est.CostMicros, add); err != nil {
		return nil, err
	}
	return res, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *Controller) addBudgetCheck(ctx context.Context, p *policy, now time.Time, subject, agentID string, price *Price,
	input, maxOut, cost int64, add func(string, *Rejection, string)) error {
	if p.mode == ModeOff {
		add("budget", nil, "enforcement off: budgets are not checked")
		return nil
	}
	scopes := p.scopes(now, subject, agentID, "")
	keys := make([]string, len(scopes))
	for i, s := range scopes {
		keys[i] = s.key
	}
	counters, err := c.store.BudgetCounters(ctx, keys)
	if err != nil {
		return err
	}
	limits, err := c.limits(ctx, p, scopes, now)
	if err != nil {
		return err
	}
	remaining, tight := int64(math.MaxInt64), limit{}
	for key, l := range limits {
		cv := counters[key]
		if left := l.limit - cv.SpentMicros - cv.ReservedMicros; left < remaining {
			remaining, tight = left, l
		}
	}
	switch {
	case remaining == math.MaxInt64:
		add("budget", nil, "no budget configured")
	case cost <= remaining:
		add("budget", nil, fmt.Sprintf("$%.6f left in the %s budget", models.MicrosToUSD(remaining), tight.kind))
	case p.mode == ModeSoft:
		add("budget", nil, fmt.Sprintf("over the %s budget; soft mode does not reject", tight.kind))
	default:
		if price != nil {
			if n := price.OutputTokensFor(remaining, input); n >= min(maxOut, c.minOutput) {
				add("budget", nil, fmt.Sprintf("the output allowance would be clamped to %d tokens to fit the %s budget", n, tight.kind))
				return nil
			}
		}
		add("budget", reject(CodeBudgetExceeded, "the %s budget of $%.2f has $%.6f left, not enough for this call",
			budgetName(tight.kind), models.MicrosToUSD(tight.budget), models.MicrosToUSD(max(remaining, 0))), "")
	}
	return nil
}

// ---- chargeback ----

// ChargebackQuery is GET /costs/chargeback.
type ChargebackQuery struct {
	GroupBy  []string
	From, To time.Time
}

// ChargebackDimensions are the accepted group_by values.
var ChargebackDimensions = []string{"user", "feature", "provider", "model", "agent", "root_run"}

// ParseGroupBy splits a comma-separated group_by; an unknown dimension is an
// *fault.Invalid naming it. Empty means user,feature,provider,model.
func ParseGroupBy(raw string) ([]string, error) {
	if strings.TrimSpace(raw) == "" {
		return []string{"user", "feature", "provider", "model"}, nil
	}
	var out []string
	for _, d := range strings.Split(raw, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		if !slices.Contains(ChargebackDimensions, d) {
			return nil, badInput("group_by", "unknown dimension %q (use %s)", d, strings.Join(ChargebackDimensions, ", "))
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// Chargeback returns grouped totals of the calls created in [From, To).
func (c *Controller) Chargeback(ctx context.Context, q ChargebackQuery) ([]models.ChargebackRow, error) {
	return c.store.Chargeback(ctx, q.GroupBy, q.From, q.To)
}

// Calls lists ledger rows (newest first).
func (c *Controller) Calls(ctx context.Context, f models.LedgerFilter, limit int) ([]models.LedgerEntry, error) {
	return c.store.ListLedger(ctx, f, limit)
}

// ---- status ----

// PeriodStatus is the spend of one calendar period.
type PeriodStatus struct {
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	SpendMicros    int64     `json:"spend_micros"`
	SpendUSD       float64   `json:"spend_usd"`
	ReservedMicros int64     `json:"reserved_micros"`
	ReservedUSD    float64   `json:"reserved_usd"`
	BudgetMicros   int64     `json:"budget_micros"`
	BudgetUSD      float64   `json:"budget_usd"`
	// RemainingUSD is budget - spend - reserved (nil without a budget).
	RemainingUSD *float64 `json:"remaining_usd"`
	// UsedFraction is spend / budget (nil without a budget).
	UsedFraction *float64 `json:"used_fraction"`
	// Alert is true when spend reached alert_threshold of the budget.
	Alert bool  `json:"alert"`
	Calls int64 `json:"calls"`
}

// Status answers GET /costs/status.
type Status struct {
	// Status is ready or degraded; Problems says why it is degraded.
	Status          string    `json:"status"`
	Problems        []string  `json:"problems"`
	GeneratedAt     time.Time `json:"generated_at"`
	EnforcementMode string    `json:"enforcement_mode"`
	AlertThreshold  float64   `json:"alert_threshold"`
	Periods         struct {
		Day   PeriodStatus `json:"day"`
		Month PeriodStatus `json:"month"`
	} `json:"periods"`
	InFlight struct {
		Reservations   int64      `json:"reservations"`
		ReservedMicros int64      `json:"reserved_micros"`
		ReservedUSD    float64    `json:"reserved_usd"`
		Expired        int64      `json:"expired_awaiting_reaper"`
		OldestExpiry   *time.Time `json:"oldest_expires_at,omitempty"`
		PendingCalls   int64      `json:"pending_calls"`
	} `json:"in_flight"`
	// The figures below cover the current UTC day ("window": "day").
	Window string `json:"window"`
	// RunsWaitingForBudget counts the task runs parked now because a
	// budget or quota refused their next turn (costs.run_budget_wait).
	RunsWaitingForBudget int64       `json:"runs_waiting_for_budget"`
	UnknownPricedCalls   int64       `json:"unknown_priced_calls"`
	EstimatedCalls       int64       `json:"estimated_usage_calls"`
	Attribution          Attribution `json:"attribution"`
	Rejections           struct {
		Total    int64            `json:"total"`
		ByReason map[string]int64 `json:"by_reason"`
	} `json:"rejections"`
	Retries struct {
		Attempts      int64 `json:"attempts"`
		RetryAttempts int64 `json:"retry_attempts"`
		RetriedCalls  int64 `json:"retried_calls"`
	} `json:"retries"`
	ReservationOverruns int64 `json:"reservation_overruns"`
	PricingCoverage     struct {
		Percent  float64  `json:"percent"`
		Models   int      `json:"models"`
		Priced   int      `json:"priced"`
		Unpriced []string `json:"unpriced"`
		// UnknownPricing is costs.unknown_pricing in effect; Blocked lists
		// the unpriced models it refuses (cloud models under block; a
		// local provider's unpriced models run at $0).
		UnknownPricing string   `json:"unknown_pricing"`
		Blocked        []string `json:"blocked"`
	} `json:"pricing_coverage"`
	Forecast struct {
		Method              string  `json:"method"`
		MonthEndSpendMicros int64   `json:"month_end_spend_micros"`
		MonthEndSpendUSD    float64 `json:"month_end_spend_usd"`
		MonthlyBudgetUSD    float64 `json:"monthly_budget_usd"`
		ExceedsBudget       bool    `json:"exceeds_monthly_budget"`
		DailyAverageUSD     float64 `json:"daily_average_usd"`
		ElapsedDays         float64 `json:"elapsed_days"`
	} `json:"forecast"`
	Reconciliation ReconciliationStatus `json:"reconciliation"`
	Breakers       []BreakerStatus      `json:"breakers"`
	RateLimit      struct {
		Enabled bool   `json:"enabled"`
		Backend string `json:"backend"`
	} `json:"rate_limit"`
}

// Status reports cost readiness. The verdict is degraded when accounting
// attribution is below 100% (a call without subject, source, provider or
// model, or a call never settled), when the rate-limit backend does not
// answer, or when reconciliation variance exceeds its threshold.
func (c *Controller) Status(ctx context.Context) (*Status, error) {
	if err := c.Flush(ctx); err != nil {
		c.log.Warn("cost status: recording settled calls failed", "err", err)
	}
	p := c.pol.Load()
	now := c.now().UTC()
	st := &Status{GeneratedAt: now, EnforcementMode: p.mode, AlertThreshold: p.alertThreshold, Window: "day", Problems: []string{}}
	day, month := dayOf(now), monthOf(now)
	daySum, err := c.store.SummarizeLedger(ctx, day.start, day.end)
	if err != nil {
		return nil, err
	}
	monthSum, err := c.store.SummarizeLedger(ctx, month.start, month.end)
	if err != nil {
		return nil, err
	}
	// The month's reserved spend is on its day counters.
	monthKeys := append(monthDayKeys(now), dayKey(now))
	counters, err := c.store.BudgetCounters(ctx, monthKeys)
	if err != nil {
		return nil, err
	}
	var monthReserved int64
	for _, cv := range counters {
		monthReserved += cv.ReservedMicros
	}
	build := func(pd period, sum models.LedgerSummary, reserved, budget int64) PeriodStatus {
		ps := PeriodStatus{Start: pd.start, End: pd.end, SpendMicros: sum.CostMicros, ReservedMicros: reserved, BudgetMicros: budget, Calls: sum.Calls}
		ps.SpendUSD, ps.ReservedUSD, ps.BudgetUSD = models.MicrosToUSD(ps.SpendMicros), models.MicrosToUSD(ps.ReservedMicros), models.MicrosToUSD(budget)
		if budget > 0 {
			rem := models.MicrosToUSD(budget - ps.SpendMicros - ps.ReservedMicros)
			frac := float64(ps.SpendMicros) / float64(budget)
			ps.RemainingUSD, ps.UsedFraction = &rem, &frac
			ps.Alert = p.alertThreshold > 0 && frac >= p.alertThreshold
		}
		return ps
	}
	st.Periods.Day = build(day, daySum, counters[dayKey(now)].ReservedMicros, p.dailyMicros)
	st.Periods.Month = build(month, monthSum, monthReserved, p.monthlyMicros)

	rs, err := c.store.SummarizeReservations(ctx, now)
	if err != nil {
		return nil, err
	}
	st.InFlight.Reservations, st.InFlight.ReservedMicros, st.InFlight.Expired, st.InFlight.OldestExpiry = rs.Count, rs.ReservedMicros, rs.Expired, rs.OldestExpiry
	st.InFlight.ReservedUSD = models.MicrosToUSD(rs.ReservedMicros)
	st.InFlight.PendingCalls = daySum.Pending

	st.UnknownPricedCalls, st.EstimatedCalls = daySum.UnknownPriced, daySum.Estimated
	st.Attribution = attributionOf(day.start.Format(time.DateOnly), daySum)
	if p := st.Attribution.Problem(); p != "" {
		st.Problems = append(st.Problems, p)
	}
	st.Rejections.Total, st.Rejections.ByReason = daySum.Rejected, daySum.RejectionCodes
	st.Retries.Attempts, st.Retries.RetriedCalls = daySum.Attempts, daySum.RetriedCalls
	st.Retries.RetryAttempts = daySum.RetryAttempts
	st.ReservationOverruns = daySum.Overruns
	if st.RunsWaitingForBudget, err = c.store.CountRunsWaitingFor(ctx, models.WaitingForBudget); err != nil {
		return nil, err
	}

	// Pricing coverage: configured models and models called this month.
	seen := map[string]bool{}
	for id, pc := range p.providers {
		for _, m := range append([]string{pc.DefaultModel}, pc.Models...) {
			if m != "" {
				seen[id+"/"+m] = true
			}
		}
	}
	for _, m := range monthSum.Models {
		seen[m] = true
	}
	for key := range seen {
		st.PricingCoverage.Models++
		provider, model, _ := strings.Cut(key, "/")
		if _, ok := p.prices.Lookup(provider, model, now); ok {
			st.PricingCoverage.Priced++
		} else {
			st.PricingCoverage.Unpriced = append(st.PricingCoverage.Unpriced, key)
			if p.blocksUnpriced(provider) {
				st.PricingCoverage.Blocked = append(st.PricingCoverage.Blocked, key)
			}
		}
	}
	slices.Sort(st.PricingCoverage.Unpriced)
	slices.Sort(st.PricingCoverage.Blocked)
	if st.PricingCoverage.Unpriced == nil {
		st.PricingCoverage.Unpriced = []string{}
	}
	if st.PricingCoverage.Blocked == nil {
		st.PricingCoverage.Blocked = []string{}
	}
	st.PricingCoverage.UnknownPricing = "allow"
	if p.blockUnknownPricing {
		st.PricingCoverage.UnknownPricing = "block"
	}
	st.PricingCoverage.Percent = 100
	if st.PricingCoverage.Models > 0 {
		st.PricingCoverage.Percent = math.Floor(10000*float64(st.PricingCoverage.Priced)/float64(st.PricingCoverage.Models)) / 100
	}

	// Forecast: the month's spend so far, extended linearly to month end.
	elapsed := now.Sub(month.start)
	total := month.end.Sub(month.start)
	st.Forecast.Method = "linear"
	st.Forecast.ElapsedDays = math.Round(100*elapsed.Hours()/24) / 100
	if elapsed > 0 {
		st.Forecast.MonthEndSpendMicros = int64(math.Ceil(float64(monthSum.CostMicros) * float64(total) / float64(elapsed)))
		st.Forecast.DailyAverageUSD = models.MicrosToUSD(monthSum.CostMicros) / max(elapsed.Hours()/24, 1.0/24)
	}
	st.Forecast.MonthEndSpendUSD = models.MicrosToUSD(st.Forecast.MonthEndSpendMicros)
	st.Forecast.MonthlyBudgetUSD = models.MicrosToUSD(p.monthlyMicros)
	st.Forecast.ExceedsBudget = p.monthlyMicros > 0 && st.Forecast.MonthEndSpendMicros > p.monthlyMicros

	st.Reconciliation.Enabled, st.Reconciliation.VarianceThreshold = p.reconciliationEnabled, p.reconciliationVariance
	st.Reconciliation.Status = "disabled"
	if p.reconciliationEnabled {
		st.Reconciliation.Status = "not_run"
	}
	st.Reconciliation.Providers = []ReconciliationProviderStatus{}
	if fn, _ := c.reconciliation.Load().(ReconciliationReporter); fn != nil {
		problems, err := fn(ctx, &st.Reconciliation)
		if err != nil {
			return nil, err
		}
		st.Problems = append(st.Problems, problems...)
	}

	st.Breakers = c.breakers.status(now)
	st.RateLimit.Enabled, st.RateLimit.Backend = p.rate.Enabled, c.limiterBackend
	if rl, ok := c.limiter.(*redisLimiter); ok {
		if err := rl.Ping(ctx); err != nil {
			st.Problems = append(st.Problems, "the rate-limit backend (redis) does not answer")
		}
	}
	st.Status = "ready"
	if len(st.Problems) > 0 {
		st.Status = "degraded"
	}
	return st, nil
}

// ReconciliationStatus is the reconciliation part of Status (spec cost rule
// 12): the last run of the Reconcile workflow and, per provider, the day's
// ledger and provider totals and their variance.
type ReconciliationStatus struct {
	Enabled bool `json:"enabled"`
	// Status: disabled, not_run, running, succeeded, failed, misconfigured
	// (an admin key variable is missing).
	Status string `json:"status"`
	// Variance is the largest variance fraction (by magnitude) of the last
	// run's providers; null before a run compared anything.
	Variance          *float64                       `json:"variance"`
	VarianceThreshold float64                        `json:"variance_alert_threshold"`
	LastRun           *ReconciliationRunRef          `json:"last_run,omitempty"`
	Day               string                         `json:"day,omitempty"`
	Error             string                         `json:"error,omitempty"`
	MissingKeys       []string                       `json:"missing_keys,omitempty"`
	Providers         []ReconciliationProviderStatus `json:"providers"`
}

// ReconciliationRunRef names the last run.
type ReconciliationRunRef struct {
	ID         string     `json:"id"`
	WorkflowID string     `json:"workflow_id"`
	Trigger    string     `json:"trigger"`
	Status     string     `json:"status"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// ReconciliationProviderStatus is one provider's totals of the last run.
type ReconciliationProviderStatus struct {
	Provider           string  `json:"provider"`
	Status             string  `json:"status"`
	Error              string  `json:"error,omitempty"`
	ProviderCostMicros int64   `json:"provider_cost_micros"`
	LedgerCostMicros   int64   `json:"ledger_cost_micros"`
	VarianceMicros     int64   `json:"variance_micros"`
	ProviderCostUSD    float64 `json:"provider_cost_usd"`
	LedgerCostUSD      float64 `json:"ledger_cost_usd"`
	VarianceUSD        float64 `json:"variance_usd"`
	VarianceFraction   float64 `json:"variance_fraction"`
	Alert              bool    `json:"alert"`
}

// ReconciliationReporter fills the reconciliation part of the status and
// returns the problems that degrade it (variance above the threshold, a
// failed run, a missing admin key variable).
type ReconciliationReporter func(ctx context.Context, st *ReconciliationStatus) ([]string, error)

// SetReconciliation installs the reporter (the reconciliation service is
// built after the controller).
func (c *Controller) SetReconciliation(r ReconciliationReporter) { c.reconciliation.Store(r) }
