package workflows

import "time"

// The Delivery workflow's contract (the workflow is in delivery.go, its
// activities in activities/delivery.go, the services that queue
// deliveries in internal/delivery).
const (
	// DeliveryWorkflowName is the registered workflow type.
	DeliveryWorkflowName = "Delivery"
	// ErrTypeDeliveryFailed is the failure type of a Delivery workflow
	// whose message was not delivered (the Web UI shows it failed).
	ErrTypeDeliveryFailed = "DeliveryNotDelivered"
	// ErrTypeDeliveryRejected marks an attempt that must not be retried:
	// the receiver answered a 4xx other than 429, the destination is
	// refused, or the channel is disabled or misconfigured.
	ErrTypeDeliveryRejected = "DeliveryRejected"
	// ErrTypeDeliveryAttemptFailed marks an attempt worth retrying (5xx,
	// 429, network).
	ErrTypeDeliveryAttemptFailed = "DeliveryFailed"
)

// DeliveryWorkflowID is the Delivery workflow id of a delivery: starting
// the same delivery twice is refused by Temporal.
func DeliveryWorkflowID(deliveryID string) string { return "delivery-" + deliveryID }

// DeliveryExecutionTimeout bounds a Delivery workflow: the retry window
// (r with its defaults) plus slack; the workflow ends itself earlier. The
// gateway's start (internal/delivery) and a parent's child start
// (startDelivery) both use it.
func DeliveryExecutionTimeout(r DeliveryRetry) time.Duration {
	r = r.WithDefaults()
	return r.RetryFor + r.AttemptTimeout + 10*time.Minute
}

// DeliveryInput is the input of the Delivery workflow: one outbound
// message. It holds no secret: the destination's settings (URL, method,
// header lines, secret) are resolved by the attempt activity, from the
// channel or hook named here.
type DeliveryInput struct {
	// Version is DeliveryInputVersion when the message was queued.
	Version    int    `json:"version,omitempty"`
	DeliveryID string `json:"delivery_id"`
	// Channel is "webhook" or "hook:<key>".
	Channel string `json:"channel"`
	// To overrides the channel's url for this message only (already
	// checked by CheckTarget).
	To string `json:"to,omitempty"`
	// Messaging is true for a messaging channel (Telegram, Slack ...):
	// To is the chat, and the text is sent in parts by ChannelSend
	// (channel.go) instead of one signed POST. False in histories from
	// before, which are all webhook or hook deliveries.
	Messaging bool `json:"messaging,omitempty"`
	// Hook is the event hook's destination (hooks only).
	Hook *HookTarget `json:"hook,omitempty"`
	// Body is the exact JSON body sent (and signed) on every attempt.
	Body    string        `json:"body"`
	Source  string        `json:"source"`
	AgentID string        `json:"agent_id,omitempty"`
	Retry   DeliveryRetry `json:"retry"`
}

// HookTarget is where an event hook delivers. SecretEnv is the NAME of the
// environment variable holding the secret, read at attempt time.
type HookTarget struct {
	URL       string `json:"url"`
	SecretEnv string `json:"secret_env,omitempty"`
}

// DeliveryRetry bounds the attempts of one delivery: exponential backoff
// from InitialInterval (doubling, capped at MaxInterval) until RetryFor
// has passed since the first attempt. AttemptTimeout bounds one request.
type DeliveryRetry struct {
	InitialInterval time.Duration `json:"initial_interval"`
	MaxInterval     time.Duration `json:"max_interval"`
	RetryFor        time.Duration `json:"retry_for"`
	AttemptTimeout  time.Duration `json:"attempt_timeout"`
}

// Defaults of runtime.delivery.
const (
	DefaultDeliveryInitialInterval = time.Second
	DefaultDeliveryMaxInterval     = 10 * time.Minute
	DefaultDeliveryRetryFor        = 24 * time.Hour
	DefaultDeliveryAttemptTimeout  = 30 * time.Second
)

// WithDefaults fills zero fields.
func (r DeliveryRetry) WithDefaults() DeliveryRetry {
	if r.InitialInterval <= 0 {
		r.InitialInterval = DefaultDeliveryInitialInterval
	}
	if r.MaxInterval <= 0 {
		r.MaxInterval = DefaultDeliveryMaxInterval
	}
	if r.MaxInterval < r.InitialInterval {
		r.MaxInterval = r.InitialInterval
	}
	if r.RetryFor <= 0 {
		r.RetryFor = DefaultDeliveryRetryFor
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = DefaultDeliveryAttemptTimeout
	}
	return r
}

// DeliveryResult is the outcome of a delivery.
type DeliveryResult struct {
	DeliveryID string `json:"delivery_id"`
	Status     string `json:"status"`
	Attempts   int    `json:"attempts,omitempty"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Activities of Delivery: the method names of activities.DeliveryActivities.
const (
	// ActivityDeliveryAttempt makes one signed POST and records it; input
	// DeliveryInput, result DeliveryAttemptResult.
	ActivityDeliveryAttempt = "DeliveryAttempt"
	// ActivityDeliveryFinish records the final outcome; input
	// DeliveryFinishInput.
	ActivityDeliveryFinish = "DeliveryFinish"
)

// DeliveryAttemptResult is a successful attempt.
type DeliveryAttemptResult struct {
	Attempt    int `json:"attempt"`
	StatusCode int `json:"status_code"`
}

// DeliveryFinishInput is the final outcome of a delivery.
type DeliveryFinishInput struct {
	DeliveryID string `json:"delivery_id"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
}
