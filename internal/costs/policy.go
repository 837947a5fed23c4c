package costs

import (
	"slices"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// Enforcement modes (costs.enforcement_mode).
const (
	ModeOff  = "off"
	ModeSoft = "soft"
	ModeHard = "hard"
)

// UnclassifiedDataClass is the class of a call that carries none.
const UnclassifiedDataClass = "unclassified"

// AgentPolicy is what admission needs of an agent definition.
type AgentPolicy struct {
	// Provider and Model are the agent's configured ones (for estimates).
	Provider, Model    string
	AllowedProviders   []string
	AllowedModels      []string
	DataClassification string
	// MaxCostMicros is the agent's max_cost_usd (0: none): a cap on each
	// run tree its runs root or join, like a task's (CallMeta.CostCapMicros).
	MaxCostMicros int64
}

// AgentLookup finds an agent's policy by id.
type AgentLookup func(agentID string) (AgentPolicy, bool)

// policy is the configuration admission applies, fixed for one call.
type policy struct {
	mode                   string
	defaultProvider        string
	blockUnknownPricing    bool
	dailyMicros            int64
	monthlyMicros          int64
	perUserDailyMicros     int64
	perAgentDailyMicros    int64
	alertThreshold         float64
	defaultMaxOutput       int
	outputCeiling          int
	confirmMicros          int64
	reservationTTL         time.Duration
	maxConcurrent          int
	failureThreshold       int
	cooldown               time.Duration
	allowedProviders       []string
	allowedModels          []string
	allowedRegions         []string
	cacheAllowedDataClass  []string
	providers              map[string]config.ProviderConfig
	rate                   config.RateLimitConfig
	maxBuildMicros         int64
	maxBuildTokens         int64
	reconciliationEnabled  bool
	reconciliationVariance float64
	prices                 *PriceBook
}

func newPolicy(c *config.Config, prices *PriceBook) *policy {
	cc := c.Costs
	p := &policy{
		mode:                   cc.EnforcementMode,
		defaultProvider:        c.LLM.DefaultProvider,
		blockUnknownPricing:    cc.UnknownPricing == "block",
		dailyMicros:            models.USDToMicros(cc.DailyBudgetUSD),
		monthlyMicros:          models.USDToMicros(cc.MonthlyBudgetUSD),
		perUserDailyMicros:     models.USDToMicros(cc.PerUserDailyBudgetUSD),
		perAgentDailyMicros:    models.USDToMicros(cc.PerAgentDailyBudgetUSD),
		alertThreshold:         cc.AlertThreshold,
		defaultMaxOutput:       cc.DefaultMaxOutputTokens,
		outputCeiling:          cc.MaxOutputTokensCeiling,
		confirmMicros:          models.USDToMicros(cc.ConfirmationThresholdUSD),
		reservationTTL:         cc.ReservationTTL,
		maxConcurrent:          cc.MaxConcurrentPerProvider,
		failureThreshold:       cc.CircuitFailureThreshold,
		cooldown:               cc.CircuitCooldown,
		allowedProviders:       slices.Clone(c.LLM.AllowedProviders),
		allowedModels:          slices.Clone(c.LLM.AllowedModels),
		allowedRegions:         slices.Clone(c.LLM.AllowedRegions),
		cacheAllowedDataClass:  slices.Clone(c.LLM.CacheAllowedDataClasses),
		providers:              map[string]config.ProviderConfig{},
		rate:                   c.RateLimit,
		maxBuildMicros:         models.USDToMicros(c.LLM.Studio.MaxBuildCostUSD),
		maxBuildTokens:         int64(c.LLM.Studio.MaxBuildTokens),
		reconciliationEnabled:  cc.Reconciliation.Enabled,
		reconciliationVariance: cc.Reconciliation.VarianceAlertThreshold,
		prices:                 prices,
	}
	for id, pc := range c.LLM.Providers {
		p.providers[id] = pc
	}
	if p.mode == "" {
		p.mode = ModeSoft
	}
	if p.defaultMaxOutput <= 0 {
		p.defaultMaxOutput = 4096
	}
	if p.reservationTTL <= 0 {
		p.reservationTTL = 15 * time.Minute
	}
	if p.cooldown <= 0 {
		p.cooldown = 30 * time.Second
	}
	return p
}

// outputAllowance applies default_max_output_tokens and the ceiling (which
// also bounds overrides). clamped is true when the ceiling lowered it.
func (p *policy) outputAllowance(requested int) (allowance int, clamped bool) {
	allowance = requested
	if allowance <= 0 {
		allowance = p.defaultMaxOutput
	}
	if p.outputCeiling > 0 && allowance > p.outputCeiling {
		return p.outputCeiling, true
	}
	return allowance, false
}

// checkAllowlists applies the workspace and agent allowlists; an empty list
// allows everything. A model may be listed bare or as provider/model.
func (p *policy) checkAllowlists(provider, model string, agent *AgentPolicy) *Rejection {
	listed := func(l []string, v string) bool { return len(l) == 0 || slices.Contains(l, v) }
	modelListed := func(l []string) bool { return listed(l, model) || slices.Contains(l, provider+"/"+model) }
	switch {
	case !listed(p.allowedProviders, provider):
		return reject(CodeNotAllowed, "provider %s is not in llm.allowed_providers", provider)
	case !modelListed(p.allowedModels):
		return reject(CodeNotAllowed, "model %s is not in llm.allowed_models", model)
	case agent != nil && !listed(agent.AllowedProviders, provider):
		return reject(CodeNotAllowed, "provider %s is not in the agent's llm.allowed_providers", provider)
	case agent != nil && !modelListed(agent.AllowedModels):
		return reject(CodeNotAllowed, "model %s is not in the agent's llm.allowed_models", model)
	}
	return nil
}

// checkRegion applies llm.allowed_regions to the provider's region. A
// provider without a region is not approved, unless it is local (the data
// stays on this host's network).
func (p *policy) checkRegion(provider string) *Rejection {
	if len(p.allowedRegions) == 0 {
		return nil
	}
	pc := p.providers[provider]
	if pc.Region == "" {
		if pc.Local {
			return nil
		}
		return reject(CodeRegion, "provider %s declares no region and llm.allowed_regions is %v", provider, p.allowedRegions)
	}
	if !slices.Contains(p.allowedRegions, pc.Region) {
		return reject(CodeRegion, "provider %s is in region %s, which is not in llm.allowed_regions %v", provider, pc.Region, p.allowedRegions)
	}
	return nil
}

// dataClass is the call's classification: the call's, else the agent's,
// else unclassified.
func dataClass(meta llm.CallMeta, agent *AgentPolicy) string {
	if meta.DataClassification != "" {
		return meta.DataClassification
	}
	if agent != nil && agent.DataClassification != "" {
		return agent.DataClassification
	}
	return UnclassifiedDataClass
}

// checkDataClass applies the provider's allowed_data_classes.
func (p *policy) checkDataClass(provider, class string) *Rejection {
	allowed := p.providers[provider].AllowedDataClasses
	if len(allowed) == 0 || slices.Contains(allowed, class) {
		return nil
	}
	return reject(CodeDataClass, "data classification %s may not be sent to provider %s (allowed: %v)", class, provider, allowed)
}

// cachingAllowed tells whether provider cache controls may stay on: the
// provider must have prompt_caching on and the class must be in
// llm.cache_allowed_data_classes, an allow-list: empty means no class may be
// cached (rule 9), so turning caching on never caches secret-class prompts
// by omission.
func (p *policy) cachingAllowed(provider, class string) bool {
	if !p.providers[provider].PromptCaching {
		return false
	}
	return slices.Contains(p.cacheAllowedDataClass, class)
}

// blocksUnpriced tells whether a call to an unpriced model of provider is
// refused. costs.unknown_pricing block (the default) refuses cloud models
// without a price, which would otherwise run outside every dollar budget
// at $0; a provider marked local costs nothing per token and stays allowed.
func (p *policy) blocksUnpriced(provider string) bool {
	return p.blockUnknownPricing && !p.providers[provider].Local
}

// budgetScope is a counter a call is charged to, with its own budget (0:
// none). The day counter is kept in every mode, so switching to hard
// mid-period starts from the true spend. There is no month counter: the
// monthly budget is checked on the day counter (see Controller.limits), so
// a call locks one hot row, not two.
type budgetScope struct {
	key   string
	kind  string // day, user-day, agent-day, build
	limit int64
	seed  models.CounterSeed
}

// period is a UTC calendar day or month.
type period struct {
	start, end time.Time
}

func dayOf(t time.Time) period {
	t = t.UTC()
	s := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return period{s, s.AddDate(0, 0, 1)}
}

func monthOf(t time.Time) period {
	t = t.UTC()
	s := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return period{s, s.AddDate(0, 1, 0)}
}

func dayKey(t time.Time) string { return textsOfDay(t).key }

// monthDayKeys are the day counters of t's month before t's day.
func monthDayKeys(t time.Time) []string {
	var keys []string
	for d := monthOf(t).start; d.Before(dayOf(t).start); d = d.AddDate(0, 0, 1) {
		keys = append(keys, dayKey(d))
	}
	return keys
}

// scopes are the counters a call admitted at now is charged to, the day
// first. A builder call (source builder) is also charged to its build's own
// allowance (llm.studio.max_build_cost_usd), keyed by the build's run id so
// concurrent builds never share one.
func (p *policy) scopes(now time.Time, subject, agentID string, build string) []budgetScope {
	d := dayOf(now)
	dayStart, dayEnd := d.start, d.end
	texts := textsOfDay(now)
	day := texts.date
	out := []budgetScope{
		{key: texts.key, kind: "day", limit: p.dailyMicros, seed: models.CounterSeed{Key: texts.key, From: dayStart, To: dayEnd}},
	}
	// Calls without a subject are unattributed: they stay under the global
	// budgets only (and lower the attribution figure of /costs/status).
	if p.perUserDailyMicros > 0 && subject != "" {
		k := "user-day:" + day + ":" + subject
		out = append(out, budgetScope{key: k, kind: "user-day", limit: p.perUserDailyMicros,
			seed: models.CounterSeed{Key: k, From: dayStart, To: dayEnd, Subject: subject}})
	}
	if p.perAgentDailyMicros > 0 && agentID != "" {
		k := "agent-day:" + day + ":" + agentID
		out = append(out, budgetScope{key: k, kind: "agent-day", limit: p.perAgentDailyMicros,
			seed: models.CounterSeed{Key: k, From: dayStart, To: dayEnd, AgentID: agentID}})
	}
	if p.maxBuildMicros > 0 && build != "" {
		k := "build:" + build
		out = append(out, budgetScope{key: k, kind: "build", limit: p.maxBuildMicros,
			seed: models.CounterSeed{Key: k, From: time.Unix(0, 0).UTC(), To: now.AddDate(1, 0, 0), RunID: build}})
	}
	return out
}
