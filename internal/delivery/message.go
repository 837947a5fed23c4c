package delivery

import (
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentryhq/agentry/internal/config"
)

// Names shared by the Delivery workflow (workflows/delivery.go), its
// activities and the code that starts it.
const (
	// WorkflowName is the registered type of the Delivery workflow.
	WorkflowName = "Delivery"
	// ErrTypeRejected marks an attempt that must not be retried: the
	// receiver answered a 4xx other than 429, the destination is refused,
	// or the channel is disabled or misconfigured.
	ErrTypeRejected = "DeliveryRejected"
	// ErrTypeFailed marks an attempt worth retrying (5xx, 429, network).
	ErrTypeFailed = "DeliveryFailed"
)

// Channel ids and message sources.
const (
	ChannelWebhook = "webhook"
	// HookChannelPrefix starts the channel of an event hook's deliveries.
	HookChannelPrefix = "hook:"

	SourceAPI      = "api"
	SourceSchedule = "schedule"
	SourceHook     = "hook"
)

// WorkflowID is the Delivery workflow id of a delivery.
func WorkflowID(deliveryID string) string { return "delivery-" + deliveryID }

// NewID returns a new delivery id ("dlv_" + 32 hex).
func NewID() string { return "dlv_" + strings.ReplaceAll(uuid.NewString(), "-", "") }

// Message is the input of the Delivery workflow. It holds no secret: the
// destination's settings (URL, method, header lines, secret) are resolved
// by the attempt activity, from the channel or hook named here.
type Message struct {
	DeliveryID string `json:"delivery_id"`
	// Channel is "webhook" or "hook:<key>".
	Channel string `json:"channel"`
	// To overrides the channel's url for this message only (already
	// checked by CheckTarget).
	To string `json:"to,omitempty"`
	// Hook is the event hook's destination (hooks only).
	Hook *HookTarget `json:"hook,omitempty"`
	// Body is the exact JSON body sent (and signed) on every attempt.
	Body    string `json:"body"`
	Source  string `json:"source"`
	AgentID string `json:"agent_id,omitempty"`
	Retry   Retry  `json:"retry"`
}

// HookTarget is where an event hook delivers. SecretEnv is the NAME of the
// environment variable holding the secret, read at attempt time.
type HookTarget struct {
	URL       string `json:"url"`
	SecretEnv string `json:"secret_env,omitempty"`
}

// Retry bounds the attempts of one delivery: exponential backoff from
// InitialInterval (doubling, capped at MaxInterval) until RetryFor has
// passed since the first attempt. AttemptTimeout bounds one request.
type Retry struct {
	InitialInterval time.Duration `json:"initial_interval"`
	MaxInterval     time.Duration `json:"max_interval"`
	RetryFor        time.Duration `json:"retry_for"`
	AttemptTimeout  time.Duration `json:"attempt_timeout"`
}

// Defaults of runtime.delivery.
const (
	DefaultInitialInterval = time.Second
	DefaultMaxInterval     = 10 * time.Minute
	DefaultRetryFor        = 24 * time.Hour
	DefaultAttemptTimeout  = 30 * time.Second
)

// WithDefaults fills zero fields.
func (r Retry) WithDefaults() Retry {
	if r.InitialInterval <= 0 {
		r.InitialInterval = DefaultInitialInterval
	}
	if r.MaxInterval <= 0 {
		r.MaxInterval = DefaultMaxInterval
	}
	if r.MaxInterval < r.InitialInterval {
		r.MaxInterval = r.InitialInterval
	}
	if r.RetryFor <= 0 {
		r.RetryFor = DefaultRetryFor
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = DefaultAttemptTimeout
	}
	return r
}

// RetryFromConfig reads runtime.delivery (retry_for, initial_interval,
// max_interval, attempt_timeout); zero values take the defaults.
func RetryFromConfig(cfg *config.Config) (Retry, error) {
	d := cfg.Runtime.Delivery
	return Retry{InitialInterval: d.InitialInterval, MaxInterval: d.MaxInterval, RetryFor: d.RetryFor, AttemptTimeout: d.AttemptTimeout}.WithDefaults(), nil
}
