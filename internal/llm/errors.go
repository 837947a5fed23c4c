package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/scrub"
)

// ErrUnknownProvider is wrapped by the Router's error for a call naming a provider id that is not
// configured (400: the request or the agent names it).
var ErrUnknownProvider = fault.New(fault.KindInvalid, fault.CodeInvalid, "unknown llm provider")

// ErrStreamIncomplete is wrapped by the error of a stream that ended before the provider's final
// event (connection closed, idle timeout): the Response beside it holds the partial content.
var ErrStreamIncomplete = errors.New("stream ended before the response was complete")

// ProviderError is a failure of a provider: an HTTP error status, an error event inside a stream,
// an unreachable endpoint or a broken connection. The API maps it to 502 (or passes 429 on).
// Error texts never contain API keys.
type ProviderError struct {
	Provider string // config id
	Address  string // base URL
	// StatusCode is the HTTP status; 0 when no response was received or the error came inside a
	// stream.
	StatusCode int
	// Type is the provider's error type when it sent one (rate_limit_error, overloaded_error, ...).
	Type    string
	Message string
	// Retryable tells whether the same request may succeed when repeated (429, 5xx, network).
	Retryable bool
	// RetryAfter is the wait the provider asked for (Retry-After header), uncapped; 0 when none.
	RetryAfter time.Duration
	// Unreachable is set when no connection could be made (refused, DNS, no route).
	Unreachable bool
	// Err is the underlying cause, if any.
	Err error
}

// scrubError removes secrets from a provider's error: the ProviderError's own
// fields (the provider may echo our request, API key included, in its error
// body) and the text of whatever wraps it.
func scrubError(err error) error {
	if err == nil {
		return nil
	}
	var pe *ProviderError
	if errors.As(err, &pe) {
		pe.Message = scrub.String(pe.Message)
		pe.Type = scrub.String(pe.Type)
	}
	return scrub.Error(err)
}

// Error is the error's text, secrets removed (see package scrub).
func (e *ProviderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "llm provider %q (%s)", e.Provider, e.Address)
	switch {
	case e.Unreachable:
		b.WriteString(" is unreachable")
	case e.StatusCode != 0:
		fmt.Fprintf(&b, ": HTTP %d", e.StatusCode)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return scrub.String(b.String())
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Fault implements fault.Fault: a provider's failure is the gateway's 502
// (provider_error), naming the provider.
func (e *ProviderError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindUpstream, Code: "provider_error", Message: e.Error(), Fields: map[string]any{"provider": e.Provider}}
}

// IsUnreachable reports whether err means the provider could not be reached at all (connection
// refused, unknown host, no route), as opposed to answering with an error.
func IsUnreachable(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && pe.Unreachable
}

// IsRetryable reports whether a call that failed with err may be repeated: provider errors marked
// retryable (429, 408, 5xx, overloaded, network failures before an answer). Cancellation, deadlines,
// 4xx and errors of the caller's onDelta are not retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *callbackError
	if errors.As(err, &ce) {
		return false
	}
	var pe *ProviderError
	return errors.As(err, &pe) && pe.Retryable
}

// retryableStatus is the set of HTTP statuses worth repeating.
func retryableStatus(code int) bool {
	return code == 408 || code == 429 || code >= 500
}

// callbackError wraps an error returned by the caller's onDelta, so it is told apart from provider
// failures (never retried, never blamed on the provider).
type callbackError struct{ err error }

func (e *callbackError) Error() string { return "stream consumer: " + e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// transportError turns a failure of http.Client.Do or of reading a body into a ProviderError (or
// returns the context error when the caller's context ended, which is no provider failure).
func (h *httpBase) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errAttemptTimeout):
			// Our own per-attempt timeout fired. The provider may have been generating (and billing)
			// all along, so a timeout is not repeated.
			return &ProviderError{Provider: h.id, Address: h.base, Message: fmt.Sprintf("no answer within %s", h.timeout), Err: context.DeadlineExceeded}
		case errors.Is(cause, errStreamIdle):
			return &ProviderError{Provider: h.id, Address: h.base,
				Message:   fmt.Sprintf("%s: nothing received for %s", ErrStreamIncomplete, h.timeout),
				Retryable: true, Err: ErrStreamIncomplete}
		default:
			return fmt.Errorf("llm provider %q: %w", h.id, ctx.Err())
		}
	}
	var ce *callbackError
	if errors.As(err, &ce) {
		return err
	}
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err // drop the "Post <url>" prefix; the address is named once by ProviderError
	}
	pe := &ProviderError{Provider: h.id, Address: h.base, Message: inner.Error(), Err: err, Retryable: true}
	switch {
	case isUnreachable(err):
		pe.Unreachable = true
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			pe.Retryable = false // an unknown host stays unknown
		}
		if h.typ == TypeOllama {
			pe.Message += fmt.Sprintf("; is Ollama running at %s?", h.base)
		}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		pe.Message = "connection closed before the response was complete"
	}
	return pe
}

// isUnreachable tells dial failures (nothing listening, unknown host, no route) from failures of an
// established connection.
func isUnreachable(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}
