package delivery

import (
	"strings"

	"github.com/google/uuid"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/workflows"
)

// The Delivery workflow's contract (name, id, input, retry bounds, error
// types) is in workflows/delivery_contract.go.

// Channel ids and message sources.
const (
	ChannelWebhook = "webhook"
	// HookChannelPrefix starts the channel of an event hook's deliveries.
	HookChannelPrefix = "hook:"

	SourceAPI      = "api"
	SourceSchedule = "schedule"
	SourceHook     = "hook"
	SourceWebhook  = "webhook"
)

// NewID returns a new delivery id ("dlv_" + 32 hex).
func NewID() string { return "dlv_" + strings.ReplaceAll(uuid.NewString(), "-", "") }

// RetryFromConfig reads runtime.delivery (retry_for, initial_interval,
// max_interval, attempt_timeout); zero values take the defaults.
func RetryFromConfig(cfg *config.Config) (workflows.DeliveryRetry, error) {
	d := cfg.Runtime.Delivery
	return workflows.DeliveryRetry{InitialInterval: d.InitialInterval, MaxInterval: d.MaxInterval, RetryFor: d.RetryFor, AttemptTimeout: d.AttemptTimeout}.WithDefaults(), nil
}
