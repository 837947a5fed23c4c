package costs

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/agentryhq/agentry/internal/fault"
)

// Rejection codes: the `code` field of the API error and the
// rejection_code of the ledger row.
const (
	CodeBudgetExceeded       = "budget_exceeded"       // 402
	CodeNotAllowed           = "not_allowed"           // 403: provider or model outside an allowlist
	CodeDataClass            = "data_class"            // 403
	CodeRegion               = "region"                // 403
	CodeUnknownPricing       = "unknown_pricing"       // 403: unknown_pricing is block
	CodeConfirmationRequired = "confirmation_required" // 409
	CodeRateLimited          = "rate_limited"          // 429: rate_limit.per_user_rpm
	CodeQuota                = "quota"                 // 429: per_user_tokens_day / per_agent_tokens_day
	CodeProviderTPM          = "provider_tpm"          // 429: llm.providers.<id>.max_tokens_per_minute
	CodeProviderBusy         = "provider_busy"         // 429: costs.max_concurrent_per_provider
	CodeCircuitOpen          = "circuit_open"          // 503
	// CodeCostCap: the run tree's max_cost_usd (task or agent) has no room
	// for the call; a durable run waits for the cap to be raised.
	CodeCostCap = "cost_cap" // 402
)

// Sentinels: errors.Is(err, ErrBudgetExceeded) holds for a Rejection with
// that code.
var (
	ErrBudgetExceeded       = errors.New("budget exceeded")
	ErrNotAllowed           = errors.New("not allowed")
	ErrDataClass            = errors.New("data classification not allowed")
	ErrRegion               = errors.New("region not allowed")
	ErrUnknownPricing       = errors.New("unknown pricing")
	ErrConfirmationRequired = errors.New("cost confirmation required")
	ErrRateLimited          = errors.New("rate limited")
	ErrQuota                = errors.New("token quota exhausted")
	ErrProviderTPM          = errors.New("provider tokens-per-minute limit reached")
	ErrProviderBusy         = errors.New("provider concurrency limit reached")
	ErrCircuitOpen          = errors.New("provider circuit open")
	ErrCostCap              = errors.New("cost cap reached")
)

// codeInfo is each code's HTTP status (the ledger's rejection rows and
// the cost report quote it), its fault kind (which the API answers with:
// the two agree) and its sentinel.
var codeInfo = map[string]struct {
	status   int
	kind     fault.Kind
	sentinel error
}{
	CodeBudgetExceeded:       {http.StatusPaymentRequired, fault.KindBudget, ErrBudgetExceeded},
	CodeNotAllowed:           {http.StatusForbidden, fault.KindForbidden, ErrNotAllowed},
	CodeDataClass:            {http.StatusForbidden, fault.KindForbidden, ErrDataClass},
	CodeRegion:               {http.StatusForbidden, fault.KindForbidden, ErrRegion},
	CodeUnknownPricing:       {http.StatusForbidden, fault.KindForbidden, ErrUnknownPricing},
	CodeConfirmationRequired: {http.StatusConflict, fault.KindConflict, ErrConfirmationRequired},
	CodeRateLimited:          {http.StatusTooManyRequests, fault.KindOverloaded, ErrRateLimited},
	CodeQuota:                {http.StatusTooManyRequests, fault.KindOverloaded, ErrQuota},
	CodeProviderTPM:          {http.StatusTooManyRequests, fault.KindOverloaded, ErrProviderTPM},
	CodeProviderBusy:         {http.StatusTooManyRequests, fault.KindOverloaded, ErrProviderBusy},
	CodeCircuitOpen:          {http.StatusServiceUnavailable, fault.KindUnavailable, ErrCircuitOpen},
	CodeCostCap:              {http.StatusPaymentRequired, fault.KindBudget, ErrCostCap},
}

// Rejection is admission refusing a call before any provider access. The
// API answers it with Status(), the code and, for 429/503, Retry-After.
type Rejection struct {
	Code    string
	Message string
	// RetryAfter is when trying again may succeed (rate limits, breaker).
	RetryAfter time.Duration
	// Estimate is the call's estimate (confirmation_required, budget_exceeded).
	Estimate *Estimate
	// Scope names the budget or limit that refused (day, month, user-day, ...).
	Scope    string
	Provider string
	Model    string
}

func (r *Rejection) Error() string { return r.Message }

// Unwrap returns the sentinel of the code.
func (r *Rejection) Unwrap() error { return codeInfo[r.Code].sentinel }

// Status is the HTTP status of the code (ARCHITECTURE.md contracts).
func (r *Rejection) Status() int {
	if info, ok := codeInfo[r.Code]; ok {
		return info.status
	}
	return http.StatusForbidden
}

// Fault implements fault.Fault: the code, Retry-After for 429/503 (also as
// retry_after_seconds) and, when known, the estimate, the scope, the
// provider and the model.
func (r *Rejection) Fault() fault.Detail {
	kind := fault.KindForbidden
	if info, ok := codeInfo[r.Code]; ok {
		kind = info.kind
	}
	d := fault.Detail{Kind: kind, Code: r.Code, Message: r.Message, RetryAfter: r.RetryAfter, Fields: map[string]any{}}
	if r.RetryAfter > 0 {
		d.Fields["retry_after_seconds"] = int(math.Max(1, math.Ceil(r.RetryAfter.Seconds())))
	}
	if r.Estimate != nil {
		d.Fields["estimate"] = r.Estimate
	}
	if r.Scope != "" {
		d.Fields["scope"] = r.Scope
	}
	if r.Provider != "" {
		d.Fields["provider"] = r.Provider
	}
	if r.Model != "" {
		d.Fields["model"] = r.Model
	}
	return d
}

func reject(code, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsRejection returns the Rejection inside err, if any.
func AsRejection(err error) (*Rejection, bool) {
	var r *Rejection
	ok := errors.As(err, &r)
	return r, ok
}
