package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/mymmrac/telego"

	"github.com/agentryhq/agentry/internal/channels"
)

// SecretHeader carries the webhook's secret_token on every Telegram
// callback.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// OffsetKey is the Cursors key of a channel's next getUpdates offset.
func OffsetKey(channelID string) string { return "telegram/" + channelID + "/offset" }

// Receive takes messages until ctx ends (returning ctx's error) or
// Telegram refuses the token (*channels.Unauthorized). Polling mode
// long-polls getUpdates; webhook mode registers the webhook and waits,
// the messages arriving through Ingress.
func (a *Adapter) Receive(ctx context.Context) error {
	a.deps.Status.SetState(channels.StateConnecting)
	if a.mode == ModeWebhook {
		return a.receiveWebhook(ctx)
	}
	return a.poll(ctx)
}

func (a *Adapter) poll(ctx context.Context) error {
	st := a.deps.Status
	// Telegram refuses getUpdates while a webhook is set (409).
	if err := a.retry(ctx, "deleteWebhook", func() error {
		return a.bot.DeleteWebhook(ctx, &telego.DeleteWebhookParams{})
	}); err != nil {
		return err
	}
	if err := a.retry(ctx, "getMe", func() error { return a.loadMe(ctx) }); err != nil {
		return err
	}
	key := OffsetKey(a.deps.Settings.ID)
	var offset int
	if err := a.retry(ctx, "reading the stored offset", func() error {
		v, err := a.deps.Cursors.Cursor(ctx, key)
		if err != nil || v == "" {
			return err
		}
		offset, err = strconv.Atoi(v)
		return err
	}); err != nil {
		return err
	}
	st.SetDetail("offset", strconv.Itoa(offset))
	st.SetState(channels.StateConnected)
	wait := a.backoffMin
	for ctx.Err() == nil {
		ups, err := a.bot.GetUpdates(ctx, &telego.GetUpdatesParams{Offset: offset, Timeout: a.pollSeconds(), AllowedUpdates: allowedUpdates})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			err = a.classify(err)
			if stop := a.transient(ctx, "getUpdates", err, &wait); stop != nil {
				return stop
			}
			var refused *channels.Refused
			if errors.As(err, &refused) && refused.Status == http.StatusConflict {
				// A webhook was set meanwhile (or another poller runs).
				_ = a.bot.DeleteWebhook(ctx, &telego.DeleteWebhookParams{})
			}
			continue
		}
		wait = a.backoffMin
		st.SetState(channels.StateConnected)
		for i := range ups {
			u := &ups[i]
			if u.UpdateID < offset {
				continue // already confirmed (a server that repeats itself)
			}
			if err := a.accept(ctx, u); err != nil {
				// Not accepted: the offset stays before it, so the next
				// getUpdates returns it again. None is skipped.
				st.SetError(err)
				a.deps.Logf("telegram channel %s: update %d not accepted, polling again from it: %s", a.deps.Settings.ID, u.UpdateID, err)
				a.sleep(ctx, &wait)
				break
			}
			offset = u.UpdateID + 1
			if err := a.deps.Cursors.SetCursor(ctx, key, strconv.Itoa(offset)); err != nil {
				// The sink has the message (it dedupes by MessageID), so a
				// redelivery after a restart is harmless: keep going.
				st.SetError(err)
				a.deps.Logf("telegram channel %s: storing offset %d: %s", a.deps.Settings.ID, offset, err)
			}
			st.SetDetail("offset", strconv.Itoa(offset))
		}
	}
	return ctx.Err()
}

// accept hands one update to the sink, or ignores it (counted, logged).
func (a *Adapter) accept(ctx context.Context, u *telego.Update) error {
	id, name := a.me()
	in, reason := mapUpdate(u, id, name)
	if reason != "" {
		a.deps.Status.Ignored()
		a.deps.Logf("telegram channel %s: update %d ignored: %s", a.deps.Settings.ID, u.UpdateID, reason)
		return nil
	}
	if a.deps.Sink == nil {
		return errors.New("no sink to hand messages to")
	}
	if err := a.deps.Sink(ctx, in); err != nil {
		return err
	}
	a.deps.Status.Received()
	return nil
}

// pollSeconds is the long-poll timeout, kept under the HTTP client's own
// timeout so a quiet poll is not cut off as an error.
func (a *Adapter) pollSeconds() int {
	t := pollTimeout
	if c := a.deps.HTTP; c != nil && c.Timeout > 0 && c.Timeout < t+5*time.Second {
		t = max(c.Timeout-5*time.Second, time.Second)
	}
	return int(t / time.Second)
}

// retry runs fn until it succeeds, ctx ends or Telegram refuses the
// token; transient failures back off (or wait retry_after).
func (a *Adapter) retry(ctx context.Context, what string, fn func() error) error {
	wait := a.backoffMin
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if stop := a.transient(ctx, what, a.classify(err), &wait); stop != nil {
			return stop
		}
	}
}

// transient handles a failed call: a refused token stops the receiver
// (status unauthorized); a 429 waits retry_after; anything else is
// recorded and backed off (1 s doubling to 30 s). It returns non-nil only
// to stop.
func (a *Adapter) transient(ctx context.Context, what string, err error, wait *time.Duration) error {
	st := a.deps.Status
	st.SetError(err)
	var unauth *channels.Unauthorized
	if errors.As(err, &unauth) {
		st.SetState(channels.StateUnauthorized)
		a.deps.Logf("telegram channel %s: %s: the token was refused; stopping until it changes", a.deps.Settings.ID, what)
		return err
	}
	var rl *channels.RateLimited
	if errors.As(err, &rl) {
		a.deps.Logf("telegram channel %s: %s rate-limited, waiting %s", a.deps.Settings.ID, what, rl.RetryAfter)
		d := max(rl.RetryAfter, a.backoffMin)
		return a.pause(ctx, d)
	}
	a.deps.Logf("telegram channel %s: %s failed, retrying in %s: %s", a.deps.Settings.ID, what, *wait, err)
	return a.sleep(ctx, wait)
}

// sleep waits *wait and doubles it (up to backoffMax).
func (a *Adapter) sleep(ctx context.Context, wait *time.Duration) error {
	err := a.pause(ctx, *wait)
	*wait = min(*wait*2, a.backoffMax)
	return err
}

func (a *Adapter) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loadMe learns the bot's id and username (for mentions and FromSelf).
func (a *Adapter) loadMe(ctx context.Context) error {
	me, err := a.bot.GetMe(ctx)
	if err != nil {
		return err
	}
	a.meMu.Lock()
	a.botID, a.username = me.ID, me.Username
	a.meMu.Unlock()
	a.deps.Status.SetDetail("username", me.Username)
	return nil
}

func (a *Adapter) me() (int64, string) {
	a.meMu.Lock()
	defer a.meMu.Unlock()
	return a.botID, a.username
}

func (a *Adapter) receiveWebhook(ctx context.Context) error {
	s := a.deps.Settings
	if err := a.retry(ctx, "setWebhook", func() error {
		return a.bot.SetWebhook(ctx, &telego.SetWebhookParams{URL: s.PublicURL, SecretToken: s.SecretToken, AllowedUpdates: allowedUpdates})
	}); err != nil {
		return err
	}
	if err := a.retry(ctx, "getMe", func() error { return a.loadMe(ctx) }); err != nil {
		return err
	}
	a.deps.Status.SetState(channels.StateConnected)
	// The webhook stays set when ctx ends: Telegram keeps the updates
	// until the gateway is back.
	<-ctx.Done()
	return ctx.Err()
}

// Ingress takes one webhook callback. The secret token is checked first
// (constant time): missing or wrong → 401 and no sink call. The update is
// answered 200 only after the sink accepted it (or it was ignored);
// otherwise 500, and Telegram redelivers it.
func (a *Adapter) Ingress(ctx context.Context, r channels.IngressRequest) channels.IngressResponse {
	want := a.deps.Settings.SecretToken
	got := r.Header.Get(SecretHeader)
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return answer(http.StatusUnauthorized, "the secret token is missing or wrong")
	}
	var u telego.Update
	if err := json.Unmarshal(r.Body, &u); err != nil || u.UpdateID <= 0 {
		return answer(http.StatusBadRequest, "the body is not a Telegram update")
	}
	if id, _ := a.me(); id == 0 {
		// Receive has not learned the bot's identity yet (or runs
		// elsewhere): mentions and FromSelf need it.
		if err := a.loadMe(ctx); err != nil {
			err = a.classify(err)
			a.deps.Status.SetError(err)
			return answer(http.StatusInternalServerError, "the bot's identity is unknown; retry")
		}
	}
	if err := a.accept(ctx, &u); err != nil {
		a.deps.Status.SetError(err)
		a.deps.Logf("telegram channel %s: update %d not accepted, Telegram will redeliver: %s", a.deps.Settings.ID, u.UpdateID, err)
		return answer(http.StatusInternalServerError, "the update was not accepted; retry")
	}
	return channels.IngressResponse{Status: http.StatusOK, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
}

func answer(status int, msg string) channels.IngressResponse {
	body, _ := json.Marshal(map[string]string{"error": msg})
	return channels.IngressResponse{Status: status, ContentType: "application/json", Body: body}
}
