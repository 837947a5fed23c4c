package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Errors of the channel adapter, in the fault vocabulary (the API maps them).
var (
	ErrUnknownChannel  = fault.NotFound("unknown channel")
	ErrChannelDisabled = fault.Conflict("channel_disabled", "channel is disabled")
	ErrNoDestination   = fault.Conflict("no_destination", "channel has no url")
)

// settingError is a bad settings key or value (400), naming the key.
func settingError(key, msg string) error { return &fault.Invalid{Field: "settings." + key, Msg: msg} }

// PermanentError is a failure that repeating cannot fix (the Delivery
// workflow does not retry it).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// SecretStore keeps channel secrets sealed (internal/secrets.Store).
type SecretStore interface {
	Set(ctx context.Context, name, value string) error
	Reveal(ctx context.Context, name string) (string, error)
	Delete(ctx context.Context, name string) error
}

// webhookSecretName is the secret-store entry of a secret set through the
// API (it shows up by name in GET /secrets).
const webhookSecretName = "channels.webhook.secret"

// webhookHeadersName is the secret-store entry of header lines set through
// the channels API.
const webhookHeadersName = "channels.webhook.headers"

// Allowed methods of the webhook channel.
var allowedMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch}

// Channels is the webhook channel adapter: its effective settings
// (config.yaml's channels.webhook with the runtime overrides made through
// the API on top), their redacted view, status, and the resolution of a
// message's destination at send time.
//
// Changes made through the API are stored in the database (table
// channel_overrides; the secret in the sealed secret store) and apply at
// once to every gateway process sharing it. config.yaml is never
// rewritten, so nothing in the user's file is lost; the view lists which
// keys are overridden.
type Channels struct {
	Config  *config.Config
	Store   models.DeliveryStore
	Secrets SecretStore
	// Scrub, when set, holds the effective header values (see RefreshScrub).
	Scrub  *scrub.Source
	Policy netguard.Policy
	// Resolver checks host names of urls being set (nil: the system's).
	Resolver Resolver
	// Env reads hook secrets (nil: the process environment).
	Env func(string) (string, bool)
	// Messaging are the messaging channels (Telegram, Slack ...;
	// internal/channels): messages to them go to a chat, named by to.
	Messaging MessagingChannels
}

// MessagingChannels checks messages to messaging channels
// (*channels.Service).
type MessagingChannels interface {
	IsMessaging(id string) bool
	// CheckChat tells whether a message can go to chat on channel id now.
	CheckChat(ctx context.Context, id, chat string) error
}

// WebhookSettings are the effective settings of channels.webhook.
type WebhookSettings struct {
	Enabled bool
	URL     string
	Method  string
	Headers string
	Secret  string
}

// IDs lists the channels this gateway has adapters for.
func (c *Channels) IDs() []string { return []string{ChannelWebhook} }

// Webhook returns the effective webhook settings and the override row.
func (c *Channels) Webhook(ctx context.Context) (WebhookSettings, *models.ChannelOverride, error) {
	base := c.Config.Channels.Webhook
	s := WebhookSettings{Enabled: base.Enabled, URL: base.URL, Method: base.Method, Headers: base.Headers, Secret: base.Secret}
	o, err := c.Store.GetChannelOverride(ctx, ChannelWebhook)
	if err != nil {
		return s, nil, err
	}
	if o.Enabled != nil {
		s.Enabled = *o.Enabled
	}
	if o.URL != nil {
		s.URL = *o.URL
	}
	if o.Method != nil {
		s.Method = *o.Method
	}
	if o.Headers != nil {
		s.Headers = *o.Headers
		// Header lines set through the API are sealed in the secret store;
		// the row keeps only their redacted form (rows written before keep
		// the text itself, used as it is).
		if c.Secrets != nil && *o.Headers != "" {
			v, err := c.Secrets.Reveal(ctx, webhookHeadersName)
			switch {
			case err == nil:
				s.Headers = v
			case !isNotFound(err):
				return s, nil, fmt.Errorf("read the webhook channel headers: %w", err)
			}
		}
	}
	if o.SecretOverride {
		s.Secret = ""
		if c.Secrets != nil {
			v, err := c.Secrets.Reveal(ctx, webhookSecretName)
			if err != nil && !isNotFound(err) {
				return s, nil, fmt.Errorf("read the webhook channel secret: %w", err)
			}
			s.Secret = v
		}
	}
	if s.Method == "" {
		s.Method = http.MethodPost
	}
	return s, o, nil
}

func isNotFound(err error) bool { return errors.Is(err, secrets.ErrNotFound) }

// ChannelStatus is the delivery record of a channel.
type ChannelStatus struct {
	LastDeliveryAt *time.Time `json:"last_delivery_at"`
	LastStatus     string     `json:"last_status"`
	LastError      string     `json:"last_error"`
	Failures       int64      `json:"failures"`
	Deliveries     int64      `json:"deliveries"`
	Pending        int64      `json:"pending"`
}

// ChannelView is a channel as the API shows it: secrets redacted.
type ChannelView struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Enabled  bool           `json:"enabled"`
	Settings map[string]any `json:"settings"`
	// Overridden lists settings changed through the API (stored in the
	// database, applied over config.yaml).
	Overridden []string      `json:"overridden"`
	Status     ChannelStatus `json:"status"`
}

// View returns one channel.
func (c *Channels) View(ctx context.Context, id string) (*ChannelView, error) {
	if id != ChannelWebhook {
		return nil, fmt.Errorf("%w: %s (channels: %s)", ErrUnknownChannel, id, strings.Join(c.IDs(), ", "))
	}
	s, o, err := c.Webhook(ctx)
	if err != nil {
		return nil, err
	}
	secret := ""
	if s.Secret != "" {
		secret = config.Redacted
	}
	v := &ChannelView{ID: id, Type: ChannelWebhook, Enabled: s.Enabled, Overridden: []string{},
		Settings: map[string]any{"enabled": s.Enabled, "url": s.URL, "method": s.Method, "headers": RedactHeaderLines(s.Headers), "secret": secret}}
	for key, set := range map[string]bool{"enabled": o.Enabled != nil, "url": o.URL != nil, "method": o.Method != nil, "headers": o.Headers != nil, "secret": o.SecretOverride} {
		if set {
			v.Overridden = append(v.Overridden, key)
		}
	}
	sort.Strings(v.Overridden)
	if v.Status, err = c.Stats(ctx, id); err != nil {
		return nil, err
	}
	return v, nil
}

// Stats is the delivery record of channel id (any channel's deliveries:
// a messaging channel's scheduled messages too).
func (c *Channels) Stats(ctx context.Context, id string) (ChannelStatus, error) {
	st, err := c.Store.ChannelStats(ctx, id)
	if err != nil {
		return ChannelStatus{}, err
	}
	out := ChannelStatus{Deliveries: st.Deliveries, Failures: st.Failures, Pending: st.Pending}
	if st.Last != nil {
		at := st.Last.UpdatedAt.UTC()
		out.LastDeliveryAt, out.LastStatus, out.LastError = &at, st.Last.Status, st.Last.LastError
	}
	return out, nil
}

// List returns every channel.
func (c *Channels) List(ctx context.Context) ([]ChannelView, error) {
	out := []ChannelView{}
	for _, id := range c.IDs() {
		v, err := c.View(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

// SetEnabled enables or disables a channel (a runtime override).
func (c *Channels) SetEnabled(ctx context.Context, id string, enabled bool, who string) (*ChannelView, error) {
	return c.Patch(ctx, id, map[string]any{"enabled": enabled}, who)
}

// Patch changes settings of a channel. Keys: enabled (boolean), url,
// method, headers, secret (strings). An empty url, headers or secret
// clears it; a secret is write-only. Headers written back as read (with
// ******** values) keep their earlier values. Unknown keys and bad values
// are refused before anything changes.
func (c *Channels) Patch(ctx context.Context, id string, settings map[string]any, who string) (*ChannelView, error) {
	if id != ChannelWebhook {
		return nil, fmt.Errorf("%w: %s (channels: %s)", ErrUnknownChannel, id, strings.Join(c.IDs(), ", "))
	}
	if len(settings) == 0 {
		return nil, settingError("", "no settings given (keys: enabled, url, method, headers, secret)")
	}
	cur, o, err := c.Webhook(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var newSecret, newHeaders *string
	for _, k := range keys {
		v := settings[k]
		switch k {
		case "enabled":
			b, ok := v.(bool)
			if !ok {
				return nil, settingError(k, "expected true or false")
			}
			o.Enabled = &b
		case "url", "method", "headers", "secret":
			s, ok := v.(string)
			if !ok {
				if v != nil {
					return nil, settingError(k, "expected a string")
				}
				s = ""
			}
			switch k {
			case "url":
				s = strings.TrimSpace(s)
				if s != "" {
					if _, err := CheckTarget(ctx, c.Policy, c.Resolver, "url", s); err != nil {
						return nil, settingError(k, err.(*TargetError).Msg)
					}
				}
				o.URL = &s
			case "method":
				m := strings.ToUpper(strings.TrimSpace(s))
				if m == "" {
					m = http.MethodPost
				}
				if !slices.Contains(allowedMethods, m) {
					return nil, settingError(k, fmt.Sprintf("%q is not allowed (use %s)", s, strings.Join(allowedMethods, ", ")))
				}
				o.Method = &m
			case "headers":
				merged, err := MergeRedacted(cur.Headers, s)
				if err != nil {
					return nil, settingError(k, err.Error())
				}
				newHeaders = &merged
			case "secret":
				if s == config.Redacted {
					continue // written back as read: unchanged
				}
				newSecret = &s
			}
		default:
			return nil, settingError(k, "unknown key (use enabled, url, method, headers or secret)")
		}
	}
	if newSecret != nil {
		if c.Secrets == nil {
			return nil, settingError("secret", "this gateway has no secret store")
		}
		if *newSecret == "" {
			if err := c.Secrets.Delete(ctx, webhookSecretName); err != nil && !isNotFound(err) {
				return nil, fmt.Errorf("clear the webhook channel secret: %w", err)
			}
		} else if err := c.Secrets.Set(ctx, webhookSecretName, *newSecret); err != nil {
			return nil, settingError("secret", err.Error())
		}
		o.SecretOverride = true
	}
	if newHeaders != nil {
		// Header values are secrets: sealed like the secret, the row holds
		// the names only.
		if c.Secrets == nil {
			return nil, settingError("headers", "this gateway has no secret store")
		}
		if *newHeaders == "" {
			if err := c.Secrets.Delete(ctx, webhookHeadersName); err != nil && !isNotFound(err) {
				return nil, fmt.Errorf("clear the webhook channel headers: %w", err)
			}
		} else if err := c.Secrets.Set(ctx, webhookHeadersName, *newHeaders); err != nil {
			return nil, settingError("headers", err.Error())
		}
		redacted := RedactHeaderLines(*newHeaders)
		o.Headers = &redacted
	}
	o.UpdatedBy = who
	if err := c.Store.SaveChannelOverride(ctx, o); err != nil {
		return nil, err
	}
	if newHeaders != nil {
		c.Scrub.Add(HeaderValues(*newHeaders)...)
	}
	return c.View(ctx, id)
}

// Check tells whether a message can be sent on a channel now, with to as
// its optional override: the channel exists and is enabled and has a
// destination that passes the SSRF policy. It returns the destination.
func (c *Channels) Check(ctx context.Context, id, to string) (string, error) {
	if id != ChannelWebhook && c.Messaging != nil && c.Messaging.IsMessaging(id) {
		if err := c.Messaging.CheckChat(ctx, id, to); err != nil {
			return "", err
		}
		return "chat:" + to, nil
	}
	if id != ChannelWebhook {
		return "", fmt.Errorf("%w: %s (channels: %s)", ErrUnknownChannel, id, strings.Join(c.IDs(), ", "))
	}
	s, _, err := c.Webhook(ctx)
	if err != nil {
		return "", err
	}
	if !s.Enabled {
		return "", fmt.Errorf("%w: %s", ErrChannelDisabled, id)
	}
	if to != "" {
		if _, err := CheckTarget(ctx, c.Policy, c.Resolver, "to", to); err != nil {
			return "", err
		}
		return to, nil
	}
	if s.URL == "" {
		return "", fmt.Errorf("%w: set channels.webhook.url (or pass to)", ErrNoDestination)
	}
	if _, err := c.Policy.CheckURL(s.URL); err != nil {
		return "", &TargetError{Field: "channels.webhook.url", Msg: err.Error()}
	}
	return s.URL, nil
}

// Target resolves where a channel message goes, at attempt time. Problems
// that retrying cannot fix are *PermanentError.
func (c *Channels) Target(ctx context.Context, msg workflows.DeliveryInput) (Target, error) {
	if msg.Hook != nil {
		if _, err := c.Policy.CheckURL(msg.Hook.URL); err != nil {
			return Target{}, &PermanentError{err}
		}
		return hookTarget(msg.Hook, c.Env)
	}
	if msg.Channel != ChannelWebhook {
		return Target{}, &PermanentError{fmt.Errorf("%w: %s", ErrUnknownChannel, msg.Channel)}
	}
	s, _, err := c.Webhook(ctx)
	if err != nil {
		return Target{}, err // the database may be back on the next attempt
	}
	if !s.Enabled {
		return Target{}, &PermanentError{fmt.Errorf("%w: %s", ErrChannelDisabled, msg.Channel)}
	}
	url := s.URL
	if msg.To != "" {
		url = msg.To
	}
	if url == "" {
		return Target{}, &PermanentError{fmt.Errorf("%w: set channels.webhook.url", ErrNoDestination)}
	}
	if _, err := c.Policy.CheckURL(url); err != nil {
		return Target{}, &PermanentError{err}
	}
	lines, err := ParseHeaderLines(s.Headers)
	if err != nil {
		return Target{}, &PermanentError{fmt.Errorf("channels.webhook.%w", err)}
	}
	return Target{URL: url, Method: s.Method, Headers: lines, Secret: s.Secret}, nil
}

// RefreshScrub registers the effective header values with c.Scrub (at
// start; a value replaced through the API stays scrubbed until the next
// refresh, the safe side).
func (c *Channels) RefreshScrub(ctx context.Context) error {
	s, _, err := c.Webhook(ctx)
	if err != nil {
		return err
	}
	c.Scrub.Set(HeaderValues(s.Headers)...)
	return nil
}
