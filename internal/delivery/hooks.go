package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/models"
)

// Hook is one entry of the `hooks` config key: events whose type matches
// one of On (glob patterns: run.*, run.finished, *) and, when Agents is
// set, whose agent is listed, are POSTed to URL as signed webhooks.
type Hook struct {
	// Key identifies the hook across restarts (a digest of its settings).
	Key       string
	On        []string
	Agents    []string
	URL       string
	SecretEnv string
}

// ParseHooks validates the hooks config. Errors name hooks[i].
func ParseHooks(cfgs []config.HookConfig, p netguard.Policy) ([]Hook, error) {
	out := make([]Hook, 0, len(cfgs))
	for i, c := range cfgs {
		key := fmt.Sprintf("hooks[%d]", i)
		if len(c.On) == 0 {
			return nil, fmt.Errorf("%s.on: list at least one event type pattern (e.g. run.*)", key)
		}
		for _, pat := range c.On {
			if _, err := path.Match(pat, ""); err != nil || strings.TrimSpace(pat) == "" {
				return nil, fmt.Errorf("%s.on: %q is not a valid pattern", key, pat)
			}
		}
		if _, err := p.CheckURL(c.URL); err != nil {
			return nil, fmt.Errorf("%s.url: %v", key, err)
		}
		h := sha256.Sum256([]byte(c.URL + "\x00" + strings.Join(c.On, ",") + "\x00" + strings.Join(c.Agents, ",") + "\x00" + c.SecretEnv))
		out = append(out, Hook{Key: hex.EncodeToString(h[:8]), On: c.On, Agents: c.Agents, URL: c.URL, SecretEnv: c.SecretEnv})
	}
	return out, nil
}

// Matches reports whether an event goes to this hook.
func (h Hook) Matches(ev models.Event) bool {
	if len(h.Agents) > 0 && !slices.Contains(h.Agents, ev.AgentID) {
		return false
	}
	for _, pat := range h.On {
		if ok, _ := path.Match(pat, ev.Type); ok {
			return true
		}
	}
	return false
}

// filter narrows the subscription's reads (Matches decides).
func (h Hook) filter() models.EventFilter {
	var f models.EventFilter
	for _, pat := range h.On {
		i := strings.IndexAny(pat, "*?[\\")
		if i == 0 {
			return models.EventFilter{}
		}
		if i < 0 {
			i = len(pat)
		}
		f.TypePrefixes = append(f.TypePrefixes, pat[:i])
	}
	if len(h.Agents) == 1 {
		f.AgentID = h.Agents[0]
	}
	return f
}

// HookBody is the JSON body of an event hook delivery.
type HookBody struct {
	DeliveryID string       `json:"delivery_id"`
	Type       string       `json:"type"`
	Event      models.Event `json:"event"`
}

// EventSource is the event stream (*events.Bus).
type EventSource interface {
	Subscribe(ctx context.Context, f models.EventFilter, after int64) (<-chan models.Event, error)
	LastID(ctx context.Context) (int64, error)
}

// Hooks feeds matching events to the Delivery workflow. Each hook reads
// the stream from its cursor (stored in hook_cursors), so events that
// arrive while the gateway is down are delivered after it starts; a hook
// that never ran starts at the end of the stream. The delivery id is
// derived from the hook and the event id, so an event handed over twice
// (two gateway processes, a crash before the cursor moved) is delivered
// once.
type Hooks struct {
	Hooks      []Hook
	Events     EventSource
	Store      models.DeliveryStore
	Deliveries *Service
	Log        *slog.Logger
	// RetryEvery is the pause before handing an event over again when
	// Temporal did not take it (default 5s).
	RetryEvery time.Duration
}

// Run delivers until ctx ends.
func (h *Hooks) Run(ctx context.Context) {
	for _, hook := range h.Hooks {
		go h.runHook(ctx, hook)
	}
}

func (h *Hooks) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

func (h *Hooks) runHook(ctx context.Context, hook Hook) {
	wait := h.RetryEvery
	if wait <= 0 {
		wait = 5 * time.Second
	}
	for ctx.Err() == nil {
		if err := h.follow(ctx, hook, wait); err != nil && ctx.Err() == nil {
			h.log().Warn("event hook: stream failed; retrying", "hook", hook.Key, "url", DisplayURL(hook.URL), "err", err)
			sleep(ctx, wait)
		}
	}
}

func (h *Hooks) follow(ctx context.Context, hook Hook, wait time.Duration) error {
	cursor, found, err := h.Store.GetHookCursor(ctx, hook.Key)
	if err != nil {
		return err
	}
	if !found {
		if cursor, err = h.Events.LastID(ctx); err != nil {
			return err
		}
		if err := h.Store.SetHookCursor(ctx, hook.Key, cursor); err != nil {
			return err
		}
	}
	evs, err := h.Events.Subscribe(ctx, hook.filter(), cursor)
	if err != nil {
		return err
	}
	for ev := range evs {
		if hook.Matches(ev) {
			for {
				err := h.Deliver(ctx, hook, ev)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return nil
				}
				h.log().Warn("event hook: could not queue delivery; retrying", "hook", hook.Key, "event", ev.ID, "err", err)
				sleep(ctx, wait)
			}
		}
		if err := h.Store.SetHookCursor(detached.Context(ctx), hook.Key, ev.ID); err != nil {
			h.log().Warn("event hook: could not save cursor", "hook", hook.Key, "err", err)
		}
	}
	return nil
}

// HookDeliveryID is the delivery id of an event for a hook.
func HookDeliveryID(hookKey string, eventID int64) string {
	return fmt.Sprintf("dlv_hook_%s_%d", hookKey, eventID)
}

// Deliver queues one event for one hook.
func (h *Hooks) Deliver(ctx context.Context, hook Hook, ev models.Event) error {
	id := HookDeliveryID(hook.Key, ev.ID)
	msg, err := HookInput(id, hook, ev, h.Deliveries.Retry)
	if err != nil {
		return fmt.Errorf("encode event %d: %w", ev.ID, err)
	}
	return h.Deliveries.Enqueue(ctx, msg, hook.URL)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
