package costs

import (
	"errors"
	"fmt"
	"net/http"
	"time"
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
)

var codeInfo = map[string]struct {
	status   int
	sentinel error
}{
	CodeBudgetExceeded:       {http.StatusPaymentRequired, ErrBudgetExceeded},
	CodeNotAllowed:           {http.StatusForbidden, ErrNotAllowed},
	CodeDataClass:            {http.StatusForbidden, ErrDataClass},
	CodeRegion:               {http.StatusForbidden, ErrRegion},
	CodeUnknownPricing:       {http.StatusForbidden, ErrUnknownPricing},
	CodeConfirmationRequired: {http.StatusConflict, ErrConfirmationRequired},
	CodeRateLimited:          {http.StatusTooManyRequests, ErrRateLimited},
	CodeQuota:                {http.StatusTooManyRequests, ErrQuota},
	CodeProviderTPM:          {http.StatusTooManyRequests, ErrProviderTPM},
	CodeProviderBusy:         {http.StatusTooManyRequests, ErrProviderBusy},
	CodeCircuitOpen:          {http.StatusServiceUnavailable, ErrCircuitOpen},
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

func reject(code, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsRejection returns the Rejection inside err, if any.
func AsRejection(err error) (*Rejection, bool) {
	var r *Rejection
	ok := errors.As(err, &r)
	return r, ok
}
