package llm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/agentryhq/agentry/internal/detached"
)

// Sources of a call (CallMeta.Source): the surface the inference serves.
const (
	SourceChat      = "chat"
	SourceStream    = "stream"
	SourceWebhook   = "webhook"
	SourceTask      = "task"
	SourceScheduled = "scheduled"
	SourceEval      = "eval"
	SourceBuilder   = "builder"
	// SourceVoice is a realtime voice session (internal/voice): admitted
	// once for its worst case before it is minted, settled from the
	// provider's usage when it ends.
	SourceVoice     = "voice"
	SourceEmbedding = "embedding"
	// SourceChannel is a messaging channel's message (Telegram, Slack ...).
	SourceChannel = "channel"
	// SourceOpenAI is the OpenAI-compatible POST /v1/chat/completions.
	SourceOpenAI = "openai_compat"
	// SourceMCPServer is a call of an agent tool on the gateway's MCP
	// server (/mcp).
	SourceMCPServer = "mcp_server"
)

// Call is one inference routed through the Router.
type Call struct {
	// Provider is the config id of the provider; empty means the router's default provider.
	Provider string
	// Model is the model to use; when empty, Request.Model is taken. Do always sends Model (so a
	// Gate that changes the model changes Call.Model).
	Model   string
	Request Request
	// Stream selects Provider.Stream; OnDelta receives the text chunks (may be nil).
	Stream  bool
	OnDelta func(text string) error
	Meta    CallMeta
}

// CallMeta is who and what a call is for; governance attributes and limits by it. Prompts are not
// part of it.
type CallMeta struct {
	// CallID identifies the call durably (ledger row). Do fills a new UUID when empty; a caller that
	// may repeat the same call (a retried Temporal activity) sets a stable one so nothing is counted
	// twice.
	CallID    string
	Subject   string // authenticated subject (user or API key)
	Workspace string
	AgentID   string
	SessionID string
	RunID     string
	// RootRunID is the ledger run id of the run tree's root when the call's
	// run was delegated to by another (a peer's child run); empty when the
	// run is its own root or the call belongs to no run. Roll-ups and the
	// tree's cost cap group by it (issue 47).
	RootRunID string
	// CostCapMicros is the cost cap of the call's run tree in micro-dollars
	// (the task's or the agent's max_cost_usd; 0: none): admission counts
	// the tree's spent plus reserved cost against it (internal/costs).
	CostCapMicros int64
	// Source is one of the Source* constants.
	Source             string
	Trigger            string
	DataClassification string
	// Interactive marks calls a person waits on (confirmation threshold applies).
	Interactive bool
	// ConfirmCost is the caller's confirm_cost: go ahead despite an estimate above the threshold.
	ConfirmCost bool
	// RowPerExecution asks the gate for a ledger row of this execution's
	// own: CallID is the call's base id, and when a row of it exists that
	// may have reached the provider (anything but a rejection), the gate
	// admits the call as CallID-r2, -r3, ... (the first id free or
	// rejected) and sets CallID to it. Durable LLM turns set it: a retried
	// activity (a worker killed mid-call, a provider error) is a new
	// provider call, so it gets a new row (docs/costs.md, a row per
	// provider call).
	RowPerExecution bool
}

// Gate admits calls before any provider access; internal/costs implements it.
type Gate interface {
	// Admit may modify call (clamp Request.MaxTokens, turn off Request.PromptCaching, even reroute
	// Provider/Model) or reject it with a typed error, in which case the provider is not called and
	// Settle is not called (the gate records the rejection itself). A nil Admission with a nil error
	// admits the call without settlement.
	Admit(ctx context.Context, call *Call) (Admission, error)
}

// Admission is an admitted call awaiting settlement.
type Admission interface {
	// Settle is called exactly once after the provider call: on success, on error, on a cut-off or
	// cancelled stream (resp then holds the partial content and UsageReported tells whether the
	// usage is the provider's), and on panic. ctx is not cancelled even when the caller's was, so
	// the ledger write happens. attempts counts provider requests including retries.
	Settle(ctx context.Context, resp *Response, callErr error, attempts int)
}

// RetryObserver may be implemented by an Admission to hear about each retry of its call as it
// happens (attempt about to start, error of the previous attempt), e.g. to count retries on the call's
// ledger row.
type RetryObserver interface {
	OnRetry(attempt int, err error)
}

// UnknownProviderError is returned for a call naming a provider id that is not configured.
// errors.Is(err, ErrUnknownProvider) holds.
type UnknownProviderError struct{ ID string }

func (e *UnknownProviderError) Error() string {
	return fmt.Sprintf("%s %q", ErrUnknownProvider, e.ID)
}
func (e *UnknownProviderError) Unwrap() error { return ErrUnknownProvider }

// ErrModelRequired is returned when neither the call nor its request names a model.
var ErrModelRequired = errors.New("llm call: model is required")

// Router is the single call site of every inference: admit (Gate) -> provider (with retry) ->
// settle. It is safe for concurrent use.
type Router struct {
	mu              sync.RWMutex
	providers       map[string]Provider
	defaultProvider string
	gate            Gate
}

// NewRouter routes to providers by id; defaultProvider is used for calls without a provider. The
// providers should come from NewProvider (which adds retries).
func NewRouter(providers map[string]Provider, defaultProvider string) *Router {
	return &Router{providers: maps.Clone(providers), defaultProvider: defaultProvider}
}

// SetGate installs the admission gate (nil removes it).
func (r *Router) SetGate(g Gate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate = g
}

// Replace swaps the provider set and default, e.g. after a configuration change. Calls in flight
// finish on the provider they started with.
func (r *Router) Replace(providers map[string]Provider, defaultProvider string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.providers = maps.Clone(providers)
	r.defaultProvider = defaultProvider
}

// Provider returns the provider with the given id.
func (r *Router) Provider(id string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.providers[id]
	return p, ok
}

// DefaultProvider is the id used for calls without a provider.
func (r *Router) DefaultProvider() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.defaultProvider
}

// ProviderIDs lists the configured provider ids, sorted.
func (r *Router) ProviderIDs() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.providers))
}

// Do runs one call: fills defaults (provider, CallID), asks the Gate, calls the provider (retries
// happen inside the provider's WithRetry wrapper and are reported to the Admission), and settles the
// Admission exactly once whatever happens. A streamed call that fails midway returns the partial
// Response together with the error.
func (r *Router) Do(ctx context.Context, call *Call) (resp *Response, err error) {
	if call == nil {
		return nil, errors.New("llm router: nil call")
	}
	r.mu.RLock()
	gate := r.gate
	if call.Provider == "" {
		call.Provider = r.defaultProvider
	}
	known := r.providers[call.Provider]
	r.mu.RUnlock()
	if known == nil {
		return nil, &UnknownProviderError{ID: call.Provider}
	}
	if call.Request.IsEmbedding() && !Embeds(known) {
		return nil, fmt.Errorf("llm provider %q: %w", call.Provider, ErrEmbeddingsUnsupported)
	}
	if call.Model == "" {
		call.Model = call.Request.Model
	}
	if call.Model == "" {
		return nil, fmt.Errorf("%w (provider %q)", ErrModelRequired, call.Provider)
	}
	if call.Meta.CallID == "" {
		// Time-ordered (UUIDv7): the ledger's primary key then grows at its
		// end, and a commit writes one index page for a batch of calls
		// instead of one random page per call (docs/benchmarks/2026-11-history.md).
		call.Meta.CallID = uuid.Must(uuid.NewV7()).String()
	}
	ctx, span := startCallSpan(ctx, call)
	var p Provider
	// Registered before the settlement below, so it runs after it: the
	// span covers admission, provider and ledger settlement.
	defer func() { endCallSpan(span, call, p, resp, err) }()

	var adm Admission
	if gate != nil {
		adm, err = gate.Admit(ctx, call)
		if err != nil {
			return nil, err
		}
	}

	var attempts atomic.Int64
	attempts.Store(1)
	observer, _ := adm.(RetryObserver)
	ctx = WithRetryObserver(ctx, func(attempt int, retryErr error) {
		attempts.Store(int64(attempt))
		if observer != nil {
			observer.OnRetry(attempt, retryErr)
		}
	})
	if adm != nil {
		defer func() {
			p := recover()
			settleErr := err
			if p != nil {
				settleErr = fmt.Errorf("llm provider %q: panic: %v", call.Provider, p)
			}
			n := int(attempts.Load())
			if resp != nil && resp.Attempts > n {
				n = resp.Attempts
			}
			adm.Settle(detached.Context(ctx), resp, settleErr, n)
			if p != nil {
				panic(p)
			}
		}()
	}

	// Runs before the settle above (defers run last-in first-out): the ledger,
	// like every caller, sees the provider's error text with secrets removed.
	defer func() { err = scrubError(err) }()

	// Resolve again: the gate may have rerouted the call.
	var ok bool
	p, ok = r.Provider(call.Provider)
	if !ok {
		return nil, &UnknownProviderError{ID: call.Provider}
	}
	req := call.Request
	if call.Model != "" {
		req.Model = call.Model
	}
	if req.IsEmbedding() {
		resp, err = embed(ctx, p, req)
	} else if call.Stream {
		onDelta := call.OnDelta
		if onDelta == nil {
			onDelta = func(string) error { return nil }
		}
		resp, err = p.Stream(ctx, req, onDelta)
	} else {
		resp, err = p.Chat(ctx, req)
	}
	if resp != nil {
		resp.Attempts = max(resp.Attempts, int(attempts.Load()))
	}
	return resp, err
}
