// Package costs is LLM cost governance: the one admission and accounting
// controller every inference passes (llm.Router's Gate). Admission applies,
// in this order, before any provider access:
//
//  1. the output allowance (default_max_output_tokens, max_output_tokens_ceiling);
//  2. workspace and agent provider/model allowlists;
//  3. llm.allowed_regions against the provider's region;
//  4. the provider's allowed_data_classes (missing = unclassified);
//  5. cache controls stripped outside cache_allowed_data_classes;
//  6. the price in effect (unknown_pricing: block rejects);
//  7. the confirmation threshold of interactive surfaces;
//  8. rate_limit: per_user_rpm, per_user_tokens_day, per_agent_tokens_day;
//  9. the provider's max_tokens_per_minute (clamping when useful);
//  10. max_concurrent_per_provider;
//  11. the provider's circuit breaker;
//  12. the reservation of the worst-case cost against the budgets, in the
//     database, atomically across gateway processes (hard mode clamps the
//     output allowance to the remaining spend or rejects).
//
// Every admitted or rejected call gets a ledger row (idempotent on the call
// id) before the provider is asked; settlement completes it with the
// usage (or a conservative estimate), the cost in integer micro-dollars,
// and releases the reservation exactly once.
package costs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/textcut"
	"github.com/agentryhq/agentry/models"
)

// Windows of the rate limits.
const (
	minuteWindow = time.Minute
	dayWindow    = 24 * time.Hour
)

// DefaultMinOutputTokens is the smallest output allowance clamping may
// leave; below it the call is refused instead of being cut to uselessness.
const DefaultMinOutputTokens = 32

// DefaultConcurrencyWait is how long a call waits for a provider slot.
const DefaultConcurrencyWait = 10 * time.Second

// Alert is raised once per budget scope and period when its recorded spend
// reaches costs.alert_threshold of the budget.
type Alert struct {
	Scope        string    `json:"scope"` // day, month, user-day, agent-day
	Key          string    `json:"key"`
	SpentMicros  int64     `json:"spent_micros"`
	BudgetMicros int64     `json:"budget_micros"`
	Fraction     float64   `json:"fraction"`
	Threshold    float64   `json:"threshold"`
	At           time.Time `json:"at"`
}

// Options build a Controller.
type Options struct {
	Config *config.Config
	Store  models.LedgerStore
	Logger *slog.Logger
	// Agents finds agent allowlists and classification (nil: none).
	Agents AgentLookup
	// Limiter overrides the rate_limit backend chosen from the config.
	Limiter Limiter
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
	// OnAlert receives budget alerts (the event stream); they are logged
	// either way.
	OnAlert func(ctx context.Context, a Alert)
	// OnEvent publishes the costs.attribution events (the event stream).
	OnEvent func(ctx context.Context, ev *models.Event)
	// MinOutputTokens: see DefaultMinOutputTokens.
	MinOutputTokens int
	// ConcurrencyWait: see DefaultConcurrencyWait.
	ConcurrencyWait time.Duration
}

// Controller is the admission and accounting controller; it implements
// llm.Gate. Safe for concurrent use.
type Controller struct {
	store           *models.CostLedger
	log             *slog.Logger
	agents          AgentLookup
	limiter         Limiter
	limiterBackend  string
	now             func() time.Time
	onAlert         func(ctx context.Context, a Alert)
	minOutput       int64
	concurrencyWait time.Duration

	pol      atomic.Pointer[policy]
	breakers *breakers
	slots    *slots

	ensuredMu  sync.Mutex
	ensured    map[string]bool
	ensuredDay string
	createMu   sync.Mutex // one EnsureBudgetCounters at a time
	alerted    sync.Map   // counter key -> true

	priorMu sync.Mutex
	prior   monthPrior

	applier *applier
	// late keeps settlements whose write failed, for retry (late.go).
	late *lateSettlements

	// reconciliation holds a ReconciliationReporter (SetReconciliation).
	reconciliation atomic.Value
	// onEvent publishes events other than budget alerts (costs.attribution).
	onEvent func(ctx context.Context, ev *models.Event)
	// attributionSeen is the last attribution figure logged ("day:attributed:unattributed").
	attributionSeen atomic.Value
}

var _ llm.Gate = (*Controller)(nil)

// New builds the controller: records the configured prices in the price
// history, loads the history, and connects the rate-limit backend.
func New(ctx context.Context, opts Options) (*Controller, error) {
	if opts.Config == nil || opts.Store == nil {
		return nil, errors.New("costs: Config and Store are required")
	}
	ledger, err := opts.Store.OpenCostLedger(ctx)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		store: ledger, log: opts.Logger, agents: opts.Agents, now: opts.Now, onAlert: opts.OnAlert, onEvent: opts.OnEvent,
		minOutput: int64(opts.MinOutputTokens), concurrencyWait: opts.ConcurrencyWait,
		breakers: newBreakers(), slots: newSlots(), ensured: map[string]bool{},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.minOutput <= 0 {
		c.minOutput = DefaultMinOutputTokens
	}
	if c.concurrencyWait <= 0 {
		c.concurrencyWait = DefaultConcurrencyWait
	}
	c.limiter, c.limiterBackend = opts.Limiter, "custom"
	if c.limiter == nil {
		rl := opts.Config.RateLimit
		if rl.Backend == "redis" && rl.RedisURL != "" {
			lim, err := NewRedisLimiter(rl.RedisURL, "", c.now)
			if err != nil {
				return nil, err
			}
			if err := lim.(*redisLimiter).Ping(ctx); err != nil {
				lim.Close()
				return nil, err
			}
			c.limiter, c.limiterBackend = lim, "redis"
		} else {
			c.limiter, c.limiterBackend = NewMemoryLimiter(c.now), "memory"
		}
	}
	if err := c.Reconfigure(ctx, opts.Config); err != nil {
		c.limiter.Close()
		ledger.Close()
		return nil, err
	}
	c.applier = newApplier(c)
	c.late = newLateSettlements(c)
	return c, nil
}

// Reconfigure applies a changed configuration to calls admitted from now
// on (calls in flight settle under the policy they were admitted with).
// The rate-limit backend is not switched; that needs a restart.
func (c *Controller) Reconfigure(ctx context.Context, cfg *config.Config) error {
	if err := c.store.UpsertPrices(ctx, configuredPrices(cfg.Costs.Pricing)); err != nil {
		return err
	}
	history, err := c.store.ListPrices(ctx)
	if err != nil {
		return err
	}
	c.pol.Store(newPolicy(cfg, NewPriceBook(history, cfg.Costs.Pricing)))
	return nil
}

// Close records what settled calls still have to put on the counters, then
// releases the rate-limit backend and the ledger's statements.
func (c *Controller) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	c.late.retry(ctx)
	cancel()
	c.late.close()
	c.applier.stop()
	c.store.Close()
	return c.limiter.Close()
}

// Flush records settled calls on the budget counters now (PostgreSQL
// records them in batches, a moment after each settlement).
func (c *Controller) Flush(ctx context.Context) error { return c.applier.flush(ctx) }

// Mode is the enforcement mode in effect.
func (c *Controller) Mode() string { return c.pol.Load().mode }

// Admit implements llm.Gate; see the package comment for the order of the
// checks. A rejection is a *Rejection (errors.Is with the Err* sentinels)
// and leaves a ledger row with outcome rejected.
func (c *Controller) Admit(ctx context.Context, call *llm.Call) (llm.Admission, error) {
	p := c.pol.Load()
	now := c.now().UTC()
	if call.Meta.RowPerExecution {
		id, err := c.ExecutionCallID(ctx, call.Meta.CallID)
		if err != nil {
			return nil, fmt.Errorf("cost admission of call %s: %w", call.Meta.CallID, err)
		}
		call.Meta.CallID = id
	}
	a := &admission{c: c, p: p, id: uuid.NewString(), started: now, provider: call.Provider, model: call.Model, callID: call.Meta.CallID}
	if call.Meta.Source == llm.SourceBuilder {
		a.build = call.Meta.RunID
	}
	var agent *AgentPolicy
	if c.agents != nil && call.Meta.AgentID != "" {
		if ap, ok := c.agents(call.Meta.AgentID); ok {
			agent = &ap
		}
	}
	// The run tree's cost cap: the tighter of the task's (the caller's) and
	// the calling agent's max_cost_usd.
	if a.root = rootRunID(call.Meta); a.root != "" {
		a.capMicros = call.Meta.CostCapMicros
		if agent != nil && agent.MaxCostMicros > 0 && (a.capMicros <= 0 || agent.MaxCostMicros < a.capMicros) {
			a.capMicros = agent.MaxCostMicros
		}
		a.capMicros = max(a.capMicros, 0)
	}
	class := dataClass(call.Meta, agent)
	entry := &models.LedgerEntry{
		CallID: call.Meta.CallID, Subject: call.Meta.Subject, Workspace: call.Meta.Workspace, AgentID: call.Meta.AgentID,
		SessionID: call.Meta.SessionID, RunID: call.Meta.RunID, RootRunID: rootRunID(call.Meta), Source: call.Meta.Source, Trigger: call.Meta.Trigger,
		Provider: call.Provider, Model: call.Model, DataClassification: class, Interactive: call.Meta.Interactive,
		Mode: p.mode, StartedAt: now, CreatedAt: now, PricingStatus: models.PricingUnknown,
	}
	a.entry = entry

	// 1. Output allowance.
	requested := call.Request.MaxTokens
	allowance, clamped := p.outputAllowance(requested)
	if call.Request.IsEmbedding() {
		// An embedding produces no tokens: the worst case is the input.
		allowance, clamped = 0, false
	}
	a.maxOut = int64(allowance)
	entry.RequestedMaxOutputTokens, entry.MaxOutputTokens, entry.Clamped = int64(requested), int64(allowance), clamped
	call.Request.MaxTokens = allowance

	// 2-4. Allowlists, region, data class.
	if r := p.checkAllowlists(call.Provider, call.Model, agent); r != nil {
		return nil, a.rejectEarly(ctx, r)
	}
	if r := p.checkRegion(call.Provider); r != nil {
		return nil, a.rejectEarly(ctx, r)
	}
	if r := p.checkDataClass(call.Provider, class); r != nil {
		return nil, a.rejectEarly(ctx, r)
	}
	// 5. Cache controls.
	if call.Request.PromptCaching && !p.cachingAllowed(call.Provider, class) {
		call.Request.PromptCaching = false
	}
	// 6. Price.
	price, priced := p.prices.Lookup(call.Provider, call.Model, now)
	if priced {
		a.price = price
		entry.PricingStatus, entry.PriceVersion, entry.PriceSource, entry.PriceEffectiveDate =
			models.PricingPriced, price.Version, price.Source, price.EffectiveDate
	} else if p.blocksUnpriced(call.Provider) {
		return nil, a.rejectEarly(ctx, reject(CodeUnknownPricing,
			"model %s/%s has no price in costs.pricing and costs.unknown_pricing is block", call.Provider, call.Model))
	}
	a.estInput = EstimateInputTokens(call.Request)
	entry.EstimatedInputTokens = a.estInput
	worst := a.worst()
	// 7. Confirmation.
	if call.Meta.Interactive && p.confirmMicros > 0 && worst > p.confirmMicros && !call.Meta.ConfirmCost {
		r := reject(CodeConfirmationRequired, "this call may cost up to $%.6f, above the confirmation threshold of $%.6f; repeat the request with confirm_cost set to true",
			models.MicrosToUSD(worst), models.MicrosToUSD(p.confirmMicros))
		r.Estimate = a.estimate()
		return nil, a.rejectEarly(ctx, r)
	}
	// 8. Rate limit and token quotas.
	if r, err := a.takeRateLimits(ctx, call); r != nil || err != nil {
		return nil, a.fail(ctx, r, err)
	}
	// The builder's per-build token allowance.
	if r, err := a.takeBuildTokens(ctx); r != nil || err != nil {
		return nil, a.fail(ctx, r, err)
	}
	// 9. Provider tokens per minute.
	if r, err := a.takeTPM(ctx); r != nil || err != nil {
		return nil, a.fail(ctx, r, err)
	}
	call.Request.MaxTokens = int(a.maxOut)
	// 10. Provider concurrency.
	release, ok := c.slots.acquire(ctx, call.Provider, p.maxConcurrent, c.concurrencyWait)
	if !ok {
		r := reject(CodeProviderBusy, "provider %s already has %d calls in flight (costs.max_concurrent_per_provider)", call.Provider, p.maxConcurrent)
		r.RetryAfter = time.Second
		return nil, a.fail(ctx, r, nil)
	}
	a.releaseSlot = release
	// 11. Circuit breaker.
	probe, retryAfter, ok := c.breakers.allow(call.Provider, now, p.failureThreshold)
	if !ok {
		r := reject(CodeCircuitOpen, "provider %s is failing; calls are paused (circuit open), retry in %s", call.Provider, retryAfter.Round(time.Second))
		r.RetryAfter = retryAfter
		return nil, a.fail(ctx, r, nil)
	}
	a.probe = probe
	// 12. Reservation and the ledger row.
	r, err := a.reserve(ctx)
	if r != nil || err != nil {
		return nil, a.fail(ctx, r, err)
	}
	call.Request.MaxTokens = int(a.maxOut)
	return a, nil
}

// admission is one admitted call; it implements llm.Admission and
// llm.RetryObserver.
type admission struct {
	c        *Controller
	p        *policy
	id       string
	callID   string
	provider string
	model    string
	started  time.Time
	entry    *models.LedgerEntry
	// build is the run id of a builder call (its own allowance).
	build string
	// root and capMicros are the call's run tree and its cost cap (0:
	// none): the tree's counter holds spent plus reserved (capKey).
	root      string
	capMicros int64

	price    *Price
	estInput int64
	maxOut   int64

	keys           []string // budget counters charged
	reservationID  string
	reservedMicros int64

	windows     []windowTake // token windows to correct at settlement
	releaseSlot func()
	probe       bool

	once sync.Once
	// settled is what the ledger was told at settlement (metrics read it).
	settled models.Settlement
}

type windowTake struct {
	key    string
	member string
	span   time.Duration
	tokens bool // amount is tokens (corrected to the used tokens at settlement)
}

func (a *admission) worst() int64 {
	return a.price.Cost(llm.Usage{InputTokens: a.estInput, OutputTokens: a.maxOut})
}

func (a *admission) estimate() *Estimate {
	e := &Estimate{Provider: a.provider, Model: a.model, InputTokens: a.estInput, OutputTokens: a.maxOut,
		CostMicros: a.worst(), PricingStatus: models.PricingUnknown}
	e.CostUSD = models.MicrosToUSD(e.CostMicros)
	if a.price != nil {
		e.PricingStatus, e.Price = models.PricingPriced, a.price.Info()
	}
	if a.p.confirmMicros > 0 {
		e.ConfirmationThresholdUSD = models.MicrosToUSD(a.p.confirmMicros)
	}
	return e
}

func (a *admission) minOutput() int64 { return min(a.maxOut, a.c.minOutput) }

// takeRateLimits applies rate_limit: the request rate per subject (a run's
// calls count as one request: the member is the run id), then the rolling
// 24-hour token quotas (not in mode off: no token budget enforcement).
func (a *admission) takeRateLimits(ctx context.Context, call *llm.Call) (*Rejection, error) {
	rl := a.p.rate
	if !rl.Enabled {
		return nil, nil
	}
	lim := a.c.limiter
	subject := call.Meta.Subject
	if rl.PerUserRPM > 0 {
		member := call.Meta.RunID
		if member == "" {
			member = call.Meta.CallID
		}
		key := "rpm:user:" + subject
		got, retry, err := lim.Take(ctx, key, member, minuteWindow, int64(rl.PerUserRPM), 1, 1)
		if err != nil {
			return nil, err
		}
		if got == 0 {
			r := reject(CodeRateLimited, "rate limit of %d requests per minute reached for %s", rl.PerUserRPM, displaySubject(subject))
			r.RetryAfter, r.Scope = retry, "per_user_rpm"
			return r, nil
		}
		a.windows = append(a.windows, windowTake{key: key, member: member, span: minuteWindow})
	}
	if a.p.mode == ModeOff {
		return nil, nil
	}
	want := a.estInput + a.maxOut
	quotas := []struct {
		key, scope, who string
		limit           int64
	}{
		{"tok:user:" + subject, "per_user_tokens_day", displaySubject(subject), rl.PerUserTokensDay},
		{"tok:agent:" + call.Meta.AgentID, "per_agent_tokens_day", "agent " + call.Meta.AgentID, rl.PerAgentTokensDay},
	}
	for i, q := range quotas {
		if q.limit <= 0 || (i == 1 && call.Meta.AgentID == "") {
			continue
		}
		got, retry, err := lim.Take(ctx, q.key, a.id, dayWindow, q.limit, want, want)
		if err != nil {
			return nil, err
		}
		if got == 0 {
			r := reject(CodeQuota, "token quota of %d tokens per 24 hours (rate_limit.%s) does not leave room for this call (%d tokens) for %s",
				q.limit, q.scope, want, q.who)
			r.RetryAfter, r.Scope = retry, q.scope
			return r, nil
		}
		a.windows = append(a.windows, windowTake{key: q.key, member: a.id, span: dayWindow, tokens: true})
	}
	return nil, nil
}

// takeBuildTokens applies llm.studio.max_build_tokens to a builder call:
// the build's calls (by run id) may not use more tokens in all. Not in mode
// off (no token budget enforcement); refused with 402 like a budget.
func (a *admission) takeBuildTokens(ctx context.Context) (*Rejection, error) {
	limit := a.p.maxBuildTokens
	if limit <= 0 || a.build == "" || a.p.mode == ModeOff {
		return nil, nil
	}
	key := "build-tok:" + a.build
	want := a.estInput + a.maxOut
	got, _, err := a.c.limiter.Take(ctx, key, a.id, dayWindow, limit, want, a.estInput+a.minOutput())
	if err != nil {
		return nil, err
	}
	if got == 0 {
		r := reject(CodeBudgetExceeded, "the build's token allowance of %d tokens (llm.studio.max_build_tokens) is used up", limit)
		r.Scope = "build_tokens"
		return r, nil
	}
	a.windows = append(a.windows, windowTake{key: key, member: a.id, span: dayWindow, tokens: true})
	if got < want {
		a.clampOutput(got - a.estInput)
	}
	return nil, nil
}

// takeTPM admits estimated input plus maximum output against the provider's
// rolling minute, clamping the output when at least the minimum fits.
func (a *admission) takeTPM(ctx context.Context) (*Rejection, error) {
	tpm := int64(a.p.providers[a.provider].MaxTokensPerMinute)
	if tpm <= 0 {
		return nil, nil
	}
	key := "tpm:provider:" + a.provider
	want := a.estInput + a.maxOut
	got, retry, err := a.c.limiter.Take(ctx, key, a.id, minuteWindow, tpm, want, a.estInput+a.minOutput())
	if err != nil {
		return nil, err
	}
	if got == 0 {
		r := reject(CodeProviderTPM, "provider %s tokens-per-minute limit (%d) has no room for this call now", a.provider, tpm)
		r.RetryAfter, r.Scope = retry, "max_tokens_per_minute"
		return r, nil
	}
	a.windows = append(a.windows, windowTake{key: key, member: a.id, span: minuteWindow, tokens: true})
	if got < want {
		a.clampOutput(got - a.estInput)
	}
	return nil, nil
}

func (a *admission) clampOutput(n int64) {
	if n < a.maxOut {
		a.maxOut = n
		a.entry.MaxOutputTokens, a.entry.Clamped = n, true
	}
}

// reserve writes the pending ledger row and, in soft and hard mode, takes
// the reservation; in hard mode it fits the call into what the budgets
// have left (clamping the output) or rejects it. A call with a cost cap
// (its run tree's max_cost_usd) is also charged to the tree's counter and
// fitted into the cap in every mode: the cap is the operator's word on one
// task, not the workspace's governance mode.
func (a *admission) reserve(ctx context.Context) (*Rejection, error) {
	p := a.p
	scopes := p.scopes(a.started, a.entry.Subject, a.entry.AgentID, a.build)
	if a.capMicros > 0 {
		scopes = append(scopes, capScope(a.root, a.capMicros, a.started))
	}
	for _, s := range scopes {
		a.keys = append(a.keys, s.key)
	}
	if err := a.c.ensureCounters(ctx, scopes); err != nil {
		return nil, err
	}
	worst := a.worst()
	a.entry.ReservedMicros = worst
	params := models.AdmitParams{Entry: a.entry, AdmissionID: a.id, WorstMicros: worst, ExpiresAt: a.started.Add(p.reservationTTL)}
	if p.mode == ModeSoft || p.mode == ModeHard || a.capMicros > 0 {
		params.Keys = a.keys
	}
	var rejection *Rejection
	var limits map[string]limit
	if p.mode == ModeHard {
		var err error
		if limits, err = a.c.limits(ctx, p, scopes, a.started); err != nil {
			return nil, err
		}
	}
	if a.capMicros > 0 {
		if limits == nil {
			limits = map[string]limit{}
		}
		s := scopes[len(scopes)-1]
		limits[s.key] = limit{limit: s.limit, kind: s.kind, budget: s.limit}
	}
	if limits != nil {
		params.Limits = map[string]int64{}
		for k, l := range limits {
			params.Limits[k] = l.limit
		}
		allowance, clamped := a.maxOut, a.entry.Clamped
		params.Fit = func(counters []models.CounterValue) (int64, bool) {
			a.maxOut, a.entry.MaxOutputTokens, a.entry.Clamped = allowance, allowance, clamped
			remaining, tight, tightCounter := int64(math.MaxInt64), limit{}, models.CounterValue{}
			for _, cv := range counters {
				l, ok := limits[cv.Key]
				if !ok {
					continue
				}
				if left := l.limit - cv.SpentMicros - cv.ReservedMicros; left < remaining {
					remaining, tight, tightCounter = left, l, cv
				}
			}
			if worst <= remaining {
				return worst, true
			}
			if a.price != nil {
				if n := a.price.OutputTokensFor(remaining, a.estInput); n >= a.minOutput() {
					a.clampOutput(n)
					return a.worst(), true
				}
			}
			if tight.kind == "cap" {
				rejection = reject(CodeCostCap, "the run's cost cap (max_cost_usd) of $%.6f is reached: spent $%.6f, $%.6f reserved by calls in flight; the next call may cost up to $%.6f",
					models.MicrosToUSD(tight.budget), models.MicrosToUSD(tightCounter.SpentMicros), models.MicrosToUSD(tightCounter.ReservedMicros), models.MicrosToUSD(worst))
				a.entry.RejectionCode = CodeCostCap
			} else {
				rejection = reject(CodeBudgetExceeded, "the %s budget of $%.2f has $%.6f left, not enough for this call (up to $%.6f)",
					budgetName(tight.kind), models.MicrosToUSD(tight.budget), models.MicrosToUSD(max(remaining, 0)), models.MicrosToUSD(worst))
				a.entry.RejectionCode = CodeBudgetExceeded
			}
			rejection.Scope, rejection.Estimate = tight.kind, a.estimate()
			return 0, false
		}
	}
	res, err := a.c.store.AdmitCall(ctx, params)
	if errors.Is(err, models.ErrCountersMissing) {
		// Counters deleted behind our back: forget what we knew, try once more.
		a.c.forgetCounters()
		if err = a.c.ensureCounters(ctx, scopes); err == nil {
			res, err = a.c.store.AdmitCall(ctx, params)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cost admission of call %s: %w", a.callID, err)
	}
	if !res.Admitted {
		rejection.Provider, rejection.Model = a.provider, a.model
		return rejection, nil
	}
	if len(params.Keys) > 0 {
		a.reservationID, a.reservedMicros = a.id, res.ReservedMicros
	}
	// The budget may have lowered the allowance below what the token
	// windows hold.
	a.correctWindows(ctx, a.estInput+a.maxOut)
	return nil, nil
}

// limit is what a counter is held to in hard mode: kind and budget name the
// budget that sets it (the monthly budget may be the tighter one for the
// day counter).
type limit struct {
	limit  int64
	kind   string
	budget int64
}

// monthPrior is the recorded plus reserved spend of the month's earlier
// days (their day counters), cached per process.
type monthPrior struct {
	day       string
	at        time.Time
	spent     int64
	committed int64 // spent + reserved
}

// monthPriorRefresh bounds how old the cached earlier-days total may be. It
// only moves when calls admitted on an earlier day settle late (downwards,
// reserved becoming a smaller or equal cost), so a cached value errs on the
// safe side.
const monthPriorRefresh = time.Minute

func (c *Controller) monthPrior(ctx context.Context, now time.Time) (monthPrior, error) {
	c.priorMu.Lock()
	defer c.priorMu.Unlock()
	day := dayKey(now)
	if c.prior.day == day && now.Sub(c.prior.at) < monthPriorRefresh {
		return c.prior, nil
	}
	counters, err := c.store.BudgetCounters(ctx, monthDayKeys(now))
	if err != nil {
		return monthPrior{}, err
	}
	mp := monthPrior{day: day, at: now}
	for _, cv := range counters {
		mp.spent += cv.SpentMicros
		mp.committed += cv.SpentMicros + cv.ReservedMicros
	}
	c.prior = mp
	return mp, nil
}

// limits are the hard-mode limits of the counters: each scope's own budget,
// and on the day counter the tighter of the daily budget and what the
// monthly budget leaves after the month's earlier days. Counters without a
// limit are absent.
func (c *Controller) limits(ctx context.Context, p *policy, scopes []budgetScope, now time.Time) (map[string]limit, error) {
	out := map[string]limit{}
	for _, s := range scopes {
		if s.limit > 0 {
			out[s.key] = limit{limit: s.limit, kind: s.kind, budget: s.limit}
		}
	}
	if p.monthlyMicros > 0 {
		prior, err := c.monthPrior(ctx, now)
		if err != nil {
			return nil, err
		}
		day := scopes[0].key
		left := p.monthlyMicros - prior.committed
		if have, ok := out[day]; !ok || left < have.limit {
			out[day] = limit{limit: left, kind: "month", budget: p.monthlyMicros}
		}
	}
	return out, nil
}

func budgetName(kind string) string {
	switch kind {
	case "day":
		return "daily (costs.daily_budget_usd)"
	case "month":
		return "monthly (costs.monthly_budget_usd)"
	case "user-day":
		return "per-user daily (costs.per_user_daily_budget_usd)"
	case "agent-day":
		return "per-agent daily (costs.per_agent_daily_budget_usd)"
	case "build":
		return "per-build (llm.studio.max_build_cost_usd)"
	case "cap":
		return "run tree's cost cap (max_cost_usd)"
	}
	return kind
}

func displaySubject(s string) string {
	if s == "" {
		return "anonymous callers"
	}
	return s
}

// ensureCounters creates missing budget counters, remembering (per UTC
// day) which exist so the common path costs nothing.
func (c *Controller) ensureCounters(ctx context.Context, scopes []budgetScope) error {
	day := scopes[0].key
	missing := c.missingCounters(day, scopes)
	if len(missing) == 0 {
		return nil
	}
	// One creation at a time: at the start of a day every call in flight
	// finds the day's counter missing, and hundreds of concurrent INSERTs
	// queued on SQLite's write lock past busy_timeout ("database is
	// locked", a 500). The others wait here and find them created.
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if missing = c.missingCounters(day, scopes); len(missing) == 0 {
		return nil
	}
	if err := c.store.EnsureBudgetCounters(ctx, missing); err != nil {
		return err
	}
	c.ensuredMu.Lock()
	for _, s := range missing {
		c.ensured[s.Key] = true
	}
	c.ensuredMu.Unlock()
	return nil
}

// missingCounters are the seeds of scopes not known to exist (today).
func (c *Controller) missingCounters(day string, scopes []budgetScope) []models.CounterSeed {
	c.ensuredMu.Lock()
	defer c.ensuredMu.Unlock()
	if c.ensuredDay != day {
		c.ensured, c.ensuredDay = map[string]bool{}, day
	}
	var missing []models.CounterSeed
	for _, s := range scopes {
		if !c.ensured[s.key] {
			missing = append(missing, s.seed)
		}
	}
	return missing
}

func (c *Controller) forgetCounters() {
	c.ensuredMu.Lock()
	c.ensured = map[string]bool{}
	c.ensuredMu.Unlock()
}

// rejectEarly records a rejection that took nothing yet.
func (a *admission) rejectEarly(ctx context.Context, r *Rejection) error {
	r.Provider, r.Model = a.provider, a.model
	a.entry.RejectionCode = r.Code
	if err := a.c.store.RecordRejection(detached.Context(ctx), a.entry); err != nil {
		a.c.log.Error("cost ledger: recording a rejected call failed", "call_id", a.callID, "code", r.Code, "err", err)
	}
	return r
}

// fail undoes what admission took (window entries, slot, probe) and
// records the rejection; err (a backend failure) wins over r.
func (a *admission) fail(ctx context.Context, r *Rejection, err error) error {
	a.undo(detached.Context(ctx))
	if err != nil {
		return fmt.Errorf("cost admission of call %s: %w", a.callID, err)
	}
	if (r.Code == CodeBudgetExceeded && r.Scope != "build_tokens") || r.Code == CodeCostCap {
		return r // recorded by the admission transaction
	}
	return a.rejectEarly(ctx, r)
}

func (a *admission) undo(ctx context.Context) {
	for _, w := range a.windows {
		if err := a.c.limiter.Set(ctx, w.key, w.member, w.span, 0); err != nil {
			a.c.log.Warn("rate limit: releasing a refused call's entry failed", "key", w.key, "err", err)
		}
	}
	a.windows = nil
	if a.releaseSlot != nil {
		a.releaseSlot()
		a.releaseSlot = nil
	}
	a.c.breakers.release(a.provider, a.probe)
	a.probe = false
}

// correctWindows sets the token entries of this call to tokens.
func (a *admission) correctWindows(ctx context.Context, tokens int64) {
	for _, w := range a.windows {
		if !w.tokens {
			continue
		}
		if err := a.c.limiter.Set(ctx, w.key, w.member, w.span, tokens); err != nil {
			a.c.log.Warn("rate limit: correcting a call's tokens failed", "key", w.key, "err", err)
		}
	}
}

// OnRetry implements llm.RetryObserver: a failed attempt counts towards the
// provider's breaker as it happens (the attempts themselves are counted on
// the ledger row at settlement).
func (a *admission) OnRetry(_ int, err error) {
	if a.probe {
		return // the probe's verdict is its final outcome
	}
	if classify(err) == resultFailure {
		a.c.breakers.record(a.provider, false, resultFailure, a.c.now(), a.p.failureThreshold, a.p.cooldown)
	}
}

// Settle implements llm.Admission: it completes the ledger row with the
// usage (the provider's, or a conservative estimate when it reported none),
// releases the reservation exactly once, records the spend on the budget
// counters, corrects the token windows, frees the provider slot and feeds
// the breaker. It runs once however often it is called.
func (a *admission) Settle(ctx context.Context, resp *llm.Response, callErr error, attempts int) {
	a.once.Do(func() { a.settle(ctx, resp, callErr, attempts) })
}

func (a *admission) settle(ctx context.Context, resp *llm.Response, callErr error, attempts int) {
	now := a.c.now().UTC()
	usage, estimated := a.usage(resp, callErr)
	outcome, kind := outcomeOf(resp, callErr)
	st := models.Settlement{
		CallID: a.callID, AdmissionID: a.id, ReservationID: a.reservationID, Keys: a.keys,
		Outcome: outcome, ErrorKind: kind, Attempts: max(attempts, 1),
		InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens, CachedInputTokens: usage.CachedInputTokens,
		CacheCreationTokens: usage.CacheCreationTokens, ReasoningTokens: usage.ReasoningTokens, ToolUsePromptTokens: usage.ToolUsePromptTokens,
		UsageEstimated: estimated, CostMicros: a.price.Cost(usage), FinishedAt: now,
	}
	if resp != nil {
		st.FinishReason, st.ResponseModel, st.ProviderRequestID = truncate(resp.FinishReason, 32), truncate(resp.Model, 191), truncate(resp.RequestID, 191)
	}
	a.settled = st
	// A chat request commits its exchange after this (models.CommitLater):
	// the settlement is then held and carried by the request's next write
	// (its exchange), not waited for, and that commit covers it before the
	// reply is sent.
	queued := a.c.store.SettleCallLater(ctx, st, func(res models.SettleResult, err error) {
		if err != nil || res.Pending || (res.Applied && len(res.Counters) > 0 && a.p.alertThreshold > 0) {
			go a.recorded(detached.Context(ctx), res, err) // off the committing goroutine, which may hold the writer
		}
	})
	if !queued {
		res, err := a.c.store.SettleCall(ctx, st)
		a.recorded(ctx, res, err)
	}
	a.correctWindows(ctx, usage.InputTokens+usage.OutputTokens)
	if a.releaseSlot != nil {
		a.releaseSlot()
	}
	a.c.breakers.record(a.provider, a.probe, classify(callErr), now, a.p.failureThreshold, a.p.cooldown)
}

// recorded follows up on the settlement's write: the applier (PostgreSQL)
// and budget alerts.
func (a *admission) recorded(ctx context.Context, res models.SettleResult, err error) {
	if err != nil {
		// A full disk: the provider answered, the write did not. The
		// settlement is kept and retried (late.go), so the ledger ends with
		// the reported usage, not the reserved worst case.
		if a.c.late.keep(a, a.settled) {
			a.c.log.Warn("cost ledger: settling a call failed; the settlement is kept and retried", "call_id", a.callID, "err", err)
			return
		}
		// The reservation stays until the reaper releases it, the row stays
		// pending until it is marked expired: loud, but never double counted.
		a.c.log.Error("cost ledger: settling a call failed; its reservation is released after costs.reservation_ttl",
			"call_id", a.callID, "err", err)
		return
	}
	a.recordedLate(ctx, res)
}

// recordedLate is the follow-up of a settlement that was written.
func (a *admission) recordedLate(ctx context.Context, res models.SettleResult) {
	if res.Pending {
		a.c.applier.add(a.id)
	}
	if res.Applied {
		a.c.checkAlerts(ctx, a.p, res.Counters, a.started)
	}
}

// usage is what the call is charged for. The provider's counters when it
// reported them; nothing for an error answer (providers do not bill those)
// or an unreachable provider; otherwise (cut or cancelled stream, success
// without usage) a conservative estimate: at least the estimated prompt,
// and the output that arrived, within the allowance.
func (a *admission) usage(resp *llm.Response, callErr error) (llm.Usage, bool) {
	if resp != nil && resp.UsageReported {
		return resp.Usage, false
	}
	partial := resp != nil && (resp.Content != "" || len(resp.ToolCalls) > 0)
	var pe *llm.ProviderError
	if callErr != nil && errors.As(callErr, &pe) && !partial && (pe.StatusCode >= 400 || pe.Unreachable) {
		return llm.Usage{}, false
	}
	var u llm.Usage
	if resp != nil {
		u = resp.Usage
	}
	u.InputTokens = max(u.InputTokens, a.estInput)
	out := max(u.OutputTokens, estimateOutputTokens(resp))
	if a.maxOut > 0 {
		out = min(out, max(a.maxOut, u.OutputTokens))
	}
	u.OutputTokens = out
	return u, true
}

// outcomeOf classifies how a call ended, with an error kind that carries no
// provider text (which could echo prompt content).
func outcomeOf(resp *llm.Response, err error) (outcome, kind string) {
	if err == nil {
		return models.OutcomeSucceeded, ""
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return models.OutcomeTimeout, "deadline"
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		partial := resp != nil && (resp.Content != "" || len(resp.ToolCalls) > 0)
		switch {
		case pe.Unreachable:
			return models.OutcomeFailed, "unreachable"
		case pe.StatusCode != 0:
			return models.OutcomeFailed, fmt.Sprintf("provider_http_%d", pe.StatusCode)
		case errors.Is(err, llm.ErrStreamIncomplete) || partial:
			return models.OutcomeIncomplete, "stream_cut"
		}
		return models.OutcomeFailed, "connection"
	}
	if errors.Is(err, context.Canceled) {
		return models.OutcomeCancelled, "cancelled"
	}
	if errors.Is(err, llm.ErrUnknownProvider) {
		return models.OutcomeFailed, "unknown_provider"
	}
	// The consumer of a stream stopped it (client went away) or the call
	// ended on the gateway's side.
	return models.OutcomeCancelled, "consumer"
}

// truncate fits a provider-supplied string into a ledger column of n bytes:
// invalid UTF-8 is replaced (PostgreSQL refuses it) and the cut falls on a
// character boundary, never inside one.
func truncate(s string, n int) string {
	return textcut.Prefix(strings.ToValidUTF8(s, "\uFFFD"), n)
}

// checkAlerts raises an alert the first time (per process) a budget's
// recorded spend reaches alert_threshold of it; the monthly budget's spend
// is the month's earlier days plus the day's. admitted is when the calls
// whose settlement produced counters were admitted (it dates the month).
func (c *Controller) checkAlerts(ctx context.Context, p *policy, counters []models.CounterValue, admitted time.Time) {
	if p.alertThreshold <= 0 || len(counters) == 0 {
		return
	}
	now := c.now().UTC()
	raise := func(kind, key string, spent, budget int64) {
		if budget <= 0 {
			return
		}
		frac := float64(spent) / float64(budget)
		if frac < p.alertThreshold {
			return
		}
		if _, seen := c.alerted.LoadOrStore(key, true); seen {
			return
		}
		al := Alert{Scope: kind, Key: key, SpentMicros: spent, BudgetMicros: budget, Fraction: frac, Threshold: p.alertThreshold, At: now}
		c.log.Warn("cost budget alert threshold reached", "scope", al.Scope, "key", al.Key, "spent_usd", models.MicrosToUSD(al.SpentMicros),
			"budget_usd", models.MicrosToUSD(al.BudgetMicros), "fraction", frac)
		if c.onAlert != nil {
			c.onAlert(ctx, al)
		}
	}
	for _, cv := range counters {
		kind, _, _ := strings.Cut(cv.Key, ":")
		switch kind {
		case "day":
			raise(kind, cv.Key, cv.SpentMicros, p.dailyMicros)
			if p.monthlyMicros > 0 && cv.Key == dayKey(admitted) {
				if prior, err := c.monthPrior(ctx, admitted); err == nil {
					raise("month", "month:"+admitted.UTC().Format("2006-01"), prior.spent+cv.SpentMicros, p.monthlyMicros)
				}
			}
		case "user-day":
			raise(kind, cv.Key, cv.SpentMicros, p.perUserDailyMicros)
		case "agent-day":
			raise(kind, cv.Key, cv.SpentMicros, p.perAgentDailyMicros)
		case "build":
			raise(kind, cv.Key, cv.SpentMicros, p.maxBuildMicros)
		}
	}
}

// AlertEventType is the event type of a budget alert.
const AlertEventType = "cost.budget_alert"

// Event is the alert as an event of the event stream; its dedupe key makes
// every budget scope and period alert once, whichever process saw it first.
func (a Alert) Event() *models.Event {
	payload, _ := json.Marshal(a)
	ev := &models.Event{Type: AlertEventType, Payload: string(payload), DedupeKey: AlertEventType + ":" + a.Key}
	if a.Scope == "agent-day" {
		if i := strings.LastIndex(a.Key, ":"); i >= 0 {
			ev.AgentID = a.Key[i+1:]
		}
	}
	return ev
}

// rootRunID is the ledger id of the call's run tree root: the delegating
// root's id for a peer's call, the run's own id otherwise.
func rootRunID(m llm.CallMeta) string {
	if m.RootRunID != "" {
		return m.RootRunID
	}
	return m.RunID
}

// capScope is the counter of a run tree's cost cap: spent plus reserved
// of every call charged to root (the tree's root run), whatever its day. A
// counter created while the tree already spent starts from its ledger rows
// (root_run_id).
func capScope(root string, capMicros int64, now time.Time) budgetScope {
	k := "cap:" + root
	return budgetScope{key: k, kind: "cap", limit: capMicros,
		seed: models.CounterSeed{Key: k, From: time.Unix(0, 0).UTC(), To: now.AddDate(1, 0, 0), RootRunID: root}}
}

// maxExecutionRows bounds the rows one durable call may have (its base id
// and -r2 ... -rN): Temporal's retry policies stop long before.
const maxExecutionRows = 10000

// ExecutionCallID is the ledger id of a new execution of the durable call
// base (llm.CallMeta.RowPerExecution): base itself when it has no row yet;
// otherwise the first of base-r2, base-r3, ... without a row. A rejected
// row (its admission refused it: no provider call) is reused, as a
// repeated call id always reused its row: a call throttled by cost
// governance for an hour keeps one row. Every other outcome (pending: an
// execution interrupted mid-call, left to the reaper; failed, succeeded,
// expired) may have reached the provider and keeps its row.
func (c *Controller) ExecutionCallID(ctx context.Context, base string) (string, error) {
	id := base
	for n := 2; n <= maxExecutionRows; n++ {
		outcome, found, err := c.store.CallOutcome(ctx, id)
		if err != nil {
			return "", err
		}
		if !found || outcome == models.OutcomeRejected {
			return id, nil
		}
		id = fmt.Sprintf("%s-r%d", base, n)
	}
	return "", fmt.Errorf("call %s has %d ledger rows already", base, maxExecutionRows)
}
