package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack/socketmode"

	"github.com/agentryhq/agentry/internal/channels"
)

// receiveSocket runs Socket Mode until ctx ends or a token is refused.
//
// slack-go's client opens the connection (apps.connections.open with the
// app token, then the WebSocket), reconnects on Slack's "disconnect", a
// missed ping or a broken socket, and backs off on errors. Envelopes are
// handled one at a time in arrival order, and each is acknowledged only
// after the sink accepted its message: an unacknowledged envelope is
// redelivered by Slack (retry_attempt > 0), and the message id makes the
// redelivery join the same work.
func (a *Adapter) receiveSocket(ctx context.Context) error {
	wait := time.Second
	for {
		err := a.runSocket(ctx)
		if ctx.Err() != nil {
			a.deps.Status.SetState(channels.StateStopped)
			return ctx.Err()
		}
		err = a.mapError(err)
		if _, ok := errors.AsType[*channels.Unauthorized](err); ok {
			return err
		}
		// The library gave up on something it does not retry itself:
		// start it again, never stop receiving.
		a.deps.Status.SetState(channels.StateConnecting)
		a.deps.Status.SetError(err)
		a.deps.Logf("slack channel %s: socket mode stopped, restarting in %s: %v", a.deps.Settings.ID, wait, err)
		select {
		case <-ctx.Done():
			a.deps.Status.SetState(channels.StateStopped)
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// runSocket runs one socketmode client until it returns.
func (a *Adapter) runSocket(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sm := socketmode.New(a.api, socketmode.OptionLog(libLog{a.deps.Logf}))
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(ctx) }()
	id := a.deps.Settings.ID
	for {
		select {
		case err := <-done:
			return err
		case evt := <-sm.Events:
			switch evt.Type {
			case socketmode.EventTypeConnecting:
				a.deps.Status.SetState(channels.StateConnecting)
			case socketmode.EventTypeConnected:
				a.deps.Status.SetState(channels.StateConnected)
			case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError:
				if e, ok := evt.Data.(interface{ Error() string }); ok {
					a.deps.Status.SetError(fmt.Errorf("socket mode: %s", e.Error()))
				}
			case socketmode.EventTypeInvalidAuth:
				a.unauthorized("apps.connections.open refused the app token")
			case socketmode.EventTypeEventsAPI:
				a.envelope(ctx, sm, evt.Request)
			case socketmode.EventTypeErrorBadMessage:
				// An envelope the library cannot parse (an event type it
				// does not know) never becomes parseable: acknowledge it so
				// Slack stops redelivering, and log it.
				bad, _ := evt.Data.(*socketmode.ErrorBadMessage)
				if bad == nil {
					continue
				}
				var env struct {
					EnvelopeID string `json:"envelope_id"`
				}
				if json.Unmarshal(bad.Message, &env) == nil && env.EnvelopeID != "" {
					a.deps.Status.Ignored()
					a.deps.Logf("slack channel %s: ignored envelope %s: %v", id, env.EnvelopeID, bad.Cause)
					_ = sm.AckCtx(ctx, env.EnvelopeID, nil)
				}
			case socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive:
				// Not used by the adapter; acknowledged so Slack does not
				// show the user an error.
				if evt.Request != nil {
					_ = sm.AckCtx(ctx, evt.Request.EnvelopeID, nil)
				}
			}
		}
	}
}

// envelope hands one events_api envelope's message to the sink and
// acknowledges it only if the sink accepted it (or it is ignored).
func (a *Adapter) envelope(ctx context.Context, sm *socketmode.Client, req *socketmode.Request) {
	if req == nil {
		return
	}
	var cb callback
	if err := json.Unmarshal(req.Payload, &cb); err != nil {
		a.deps.Logf("slack channel %s: ignored envelope %s: unreadable payload", a.deps.Settings.ID, req.EnvelopeID)
		_ = sm.AckCtx(ctx, req.EnvelopeID, nil)
		return
	}
	retry := ""
	if req.RetryAttempt > 0 {
		retry = fmt.Sprintf("retry %d, %s", req.RetryAttempt, req.RetryReason)
	}
	if err := a.handle(ctx, cb, retry); err != nil {
		a.deps.Logf("slack channel %s: envelope %s (event %s) not accepted, left unacknowledged for Slack to redeliver: %v",
			a.deps.Settings.ID, req.EnvelopeID, cb.EventID, err)
		return
	}
	if err := sm.AckCtx(ctx, req.EnvelopeID, nil); err != nil {
		a.deps.Logf("slack channel %s: acknowledging envelope %s: %v", a.deps.Settings.ID, req.EnvelopeID, err)
	}
}
