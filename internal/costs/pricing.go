package costs

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// Price is one published price of a provider/model. Prices are kept as
// integer pico-dollars per token (USD per million tokens x 1e6), so cost
// arithmetic is exact integers and only the final micro-dollar amount is
// rounded (up).
type Price struct {
	Provider, Model string
	// EffectiveDate is YYYY-MM-DD (UTC); "" applies always.
	EffectiveDate string
	Version       string
	Source        string

	InputPerMTok, OutputPerMTok, CachedInputPerMTok float64

	inputPico, outputPico, cachedPico uint64
}

// PriceInfo is the price as reported by the API.
type PriceInfo struct {
	Version            string  `json:"version,omitempty"`
	Source             string  `json:"source,omitempty"`
	EffectiveDate      string  `json:"effective_date,omitempty"`
	InputPerMTok       float64 `json:"input_per_mtok"`
	OutputPerMTok      float64 `json:"output_per_mtok"`
	CachedInputPerMTok float64 `json:"cached_input_per_mtok"`
}

// Info is the price's API form.
func (p *Price) Info() *PriceInfo {
	if p == nil {
		return nil
	}
	return &PriceInfo{Version: p.Version, Source: p.Source, EffectiveDate: p.EffectiveDate,
		InputPerMTok: p.InputPerMTok, OutputPerMTok: p.OutputPerMTok, CachedInputPerMTok: p.CachedInputPerMTok}
}

func newPrice(provider, model string, pc config.PriceConfig) *Price {
	p := &Price{Provider: provider, Model: model, EffectiveDate: pc.EffectiveDate, Version: pc.Version, Source: pc.Source,
		InputPerMTok: pc.InputPerMTok, OutputPerMTok: pc.OutputPerMTok, CachedInputPerMTok: pc.CachedInputPerMTok}
	p.inputPico = picoPerToken(pc.InputPerMTok)
	p.outputPico = picoPerToken(pc.OutputPerMTok)
	// No cached price configured: cached tokens cost what other input costs
	// (never cheaper than we know).
	p.cachedPico = p.inputPico
	if pc.CachedInputPerMTok > 0 {
		p.cachedPico = picoPerToken(pc.CachedInputPerMTok)
	}
	return p
}

// picoPerToken converts USD per million tokens to pico-dollars per token.
func picoPerToken(perMTok float64) uint64 {
	if perMTok <= 0 || math.IsNaN(perMTok) {
		return 0
	}
	return uint64(math.Round(perMTok * 1e6))
}

// Cost is the cost of usage in micro-dollars, rounded up. Input tokens
// include cached ones (llm.Usage convention); cache-creation tokens are
// charged as input.
func (p *Price) Cost(u llm.Usage) int64 {
	if p == nil {
		return 0
	}
	cached := clampTokens(u.CachedInputTokens)
	input := clampTokens(u.InputTokens)
	if cached > input {
		cached = input
	}
	var acc uint128
	acc.addMul(input-cached, p.inputPico)
	acc.addMul(cached, p.cachedPico)
	acc.addMul(clampTokens(u.OutputTokens), p.outputPico)
	return acc.ceilMicros()
}

// OutputCost is the cost of n output tokens in micro-dollars, rounded up.
func (p *Price) OutputCost(n int64) int64 {
	if p == nil {
		return 0
	}
	var acc uint128
	acc.addMul(clampTokens(n), p.outputPico)
	return acc.ceilMicros()
}

// OutputTokensFor is the largest number of output tokens whose cost, added
// to the cost of the input, fits in budget micro-dollars (-1 when not even
// the input fits; math.MaxInt64 when output is free).
func (p *Price) OutputTokensFor(budgetMicros int64, inputTokens int64) int64 {
	inputCost := p.Cost(llm.Usage{InputTokens: inputTokens})
	if inputCost > budgetMicros {
		return -1
	}
	if p.outputPico == 0 {
		return math.MaxInt64
	}
	// Pico-dollars left for output; ceil(n*out/1e6) + input <= budget is
	// implied by n*out <= (budget - inputCost)*1e6 when the input cost is
	// rounded separately (it is, above), so this is conservative.
	hi, lo := bits.Mul64(uint64(budgetMicros-inputCost), 1_000_000)
	if hi >= p.outputPico {
		return math.MaxInt64
	}
	n, _ := bits.Div64(hi, lo, p.outputPico)
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

func clampTokens(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// uint128 accumulates pico-dollar products without overflow.
type uint128 struct{ hi, lo uint64 }

func (a *uint128) addMul(x, y uint64) {
	hi, lo := bits.Mul64(x, y)
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, lo, 0)
	a.hi, _ = bits.Add64(a.hi, hi, carry)
}

// ceilMicros divides pico-dollars by 1e6, rounding up, saturating at MaxInt64.
func (a uint128) ceilMicros() int64 {
	const div = 1_000_000
	if a.hi >= div {
		return math.MaxInt64
	}
	q, r := bits.Div64(a.hi, a.lo, div)
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// PriceBook holds every known price of every provider/model, newest
// effective date last, and answers which one is in effect at a time.
type PriceBook struct {
	byKey map[string][]*Price
}

// NewPriceBook builds a book from recorded history and the configured
// prices (the configuration wins for the same effective date).
func NewPriceBook(history []models.PriceVersion, configured map[string]config.PriceConfig) *PriceBook {
	b := &PriceBook{byKey: map[string][]*Price{}}
	add := func(p *Price) {
		key := p.Provider + "/" + p.Model
		list := b.byKey[key]
		if i := slices.IndexFunc(list, func(q *Price) bool { return q.EffectiveDate == p.EffectiveDate }); i >= 0 {
			list[i] = p
		} else {
			list = append(list, p)
		}
		b.byKey[key] = list
	}
	for _, h := range history {
		add(newPrice(h.Provider, h.Model, config.PriceConfig{InputPerMTok: h.InputPerMTok, OutputPerMTok: h.OutputPerMTok,
			CachedInputPerMTok: h.CachedInputPerMTok, Source: h.Source, EffectiveDate: h.EffectiveDate, Version: h.Version}))
	}
	for key, pc := range configured {
		provider, model, ok := config.SplitPricingKey(key)
		if !ok {
			continue
		}
		add(newPrice(provider, model, pc))
	}
	for _, list := range b.byKey {
		sort.Slice(list, func(i, j int) bool { return list[i].EffectiveDate < list[j].EffectiveDate })
	}
	return b
}

// Lookup returns the price of provider/model in effect at t: the one with
// the latest effective date on or before t's UTC day. ok is false when the
// model has no price in effect (unknown pricing).
func (b *PriceBook) Lookup(provider, model string, t time.Time) (*Price, bool) {
	list := b.byKey[provider+"/"+model]
	day := textsOfDay(t).date
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].EffectiveDate <= day {
			return list[i], true
		}
	}
	return nil, false
}

// Priced reports whether provider/model has any price (in effect now or later).
func (b *PriceBook) Priced(provider, model string, t time.Time) bool {
	_, ok := b.Lookup(provider, model, t)
	return ok
}

// Keys lists provider/model keys with a price.
func (b *PriceBook) Keys() []string {
	keys := make([]string, 0, len(b.byKey))
	for k := range b.byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// configuredPrices converts costs.pricing for recording in the database.
func configuredPrices(configured map[string]config.PriceConfig) []models.PriceVersion {
	out := make([]models.PriceVersion, 0, len(configured))
	for key, pc := range configured {
		provider, model, ok := config.SplitPricingKey(key)
		if !ok {
			continue
		}
		out = append(out, models.PriceVersion{Provider: provider, Model: model, EffectiveDate: pc.EffectiveDate, Version: pc.Version,
			Source: pc.Source, InputPerMTok: pc.InputPerMTok, OutputPerMTok: pc.OutputPerMTok, CachedInputPerMTok: pc.CachedInputPerMTok})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Provider+"/"+out[i].Model < out[j].Provider+"/"+out[j].Model
	})
	return out
}
