// Package slack is the Slack channel adapter, on github.com/slack-go/slack.
//
// Messages arrive by one of two modes:
//   - "events" (the default): Slack's Events API POSTs signed callbacks to
//     the gateway's /ingress/<channel id>, which routes them to Ingress. The
//     signature (v0 HMAC-SHA256 with the signing secret) and a 5-minute
//     timestamp window are checked before anything else; a callback is
//     answered 200 only after the sink accepted the message, so Slack
//     retries (X-Slack-Retry-Num) whatever the gateway did not take.
//   - "socket": Socket Mode, a WebSocket opened with the app-level token
//     (xapp-) through slack-go's socketmode client; each envelope is
//     acknowledged only after the sink accepted it, so Slack redelivers
//     what was not.
//
// Message identity: a message's id is "<channel>:<ts>", not Slack's
// event_id. Slack sends one user message that mentions the bot twice (a
// "message" event and an "app_mention" event, each with its own event_id);
// both carry the same channel and ts, so both join the same durable work
// and the message is answered once. A retry of either carries the same ts.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/fault"
)

// Modes.
const (
	ModeEvents = "events"
	ModeSocket = "socket"
)

// Slack's recommended text limit (the hard limit is 40000) and its
// chat.postMessage rate: about one message per second per channel, with
// short bursts allowed; there is no per-bot bound besides it.
var limits = channels.Limits{MaxText: 4000, PerChat: time.Second}

// Adapter is a Slack bot as a channel. It implements channels.Adapter and
// channels.IngressHandler.
type Adapter struct {
	deps channels.Deps
	mode string
	api  *slack.Client

	mu        sync.Mutex
	botUserID string // the bot's user id (U...), from auth.test
	botID     string // the bot's bot id (B...), from auth.test
}

var (
	_ channels.Adapter        = (*Adapter)(nil)
	_ channels.IngressHandler = (*Adapter)(nil)
	_ channels.Factory        = New
)

// New builds the adapter from the channel's settings (a channels.Factory).
func New(deps channels.Deps) (channels.Adapter, error) {
	s := deps.Settings
	if strings.TrimSpace(s.BotToken) == "" {
		return nil, &fault.Invalid{Field: "bot_token", Msg: "a Slack channel needs the bot token (xoxb-...)"}
	}
	mode := s.Mode
	switch mode {
	case "", ModeEvents:
		mode = ModeEvents
		if strings.TrimSpace(s.SigningSecret) == "" {
			return nil, &fault.Invalid{Field: "signing_secret", Msg: "Slack events mode needs the app's signing secret (Basic Information > App Credentials) to verify callbacks; or set mode: socket with an app_token"}
		}
	case ModeSocket:
		if strings.TrimSpace(s.AppToken) == "" {
			return nil, &fault.Invalid{Field: "app_token", Msg: "Slack socket mode needs an app-level token (xapp-...) with connections:write"}
		}
	default:
		return nil, &fault.Invalid{Field: "mode", Msg: fmt.Sprintf("unknown Slack mode %q (events or socket)", s.Mode)}
	}
	if deps.HTTP == nil {
		deps.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if deps.Status == nil {
		deps.Status = &channels.Status{}
	}
	if deps.Logf == nil {
		deps.Logf = func(string, ...any) {}
	}
	a := &Adapter{deps: deps, mode: mode}
	a.api = a.client()
	return a, nil
}

// client is a Web API client on the configured root. No library retries:
// a 429 goes back to the caller (the delivery activity) with its wait.
func (a *Adapter) client() *slack.Client {
	opts := []slack.Option{
		slack.OptionAPIURL(apiURL(a.deps.Settings.APIBaseURL)),
		slack.OptionHTTPClient(a.deps.HTTP),
		slack.OptionLog(libLog{a.deps.Logf}),
	}
	if a.deps.Settings.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(a.deps.Settings.AppToken))
	}
	return slack.New(a.deps.Settings.BotToken, opts...)
}

// apiURL normalises api_base_url: slack-go appends the method name to it.
func apiURL(base string) string {
	base = strings.TrimSpace(base)
	if base == "" {
		return slack.APIURL
	}
	return strings.TrimRight(base, "/") + "/"
}

// libLog routes the library's (debug-only) lines to the channel's log.
type libLog struct{ logf func(string, ...any) }

func (l libLog) Output(_ int, s string) error {
	l.logf("slack: %s", strings.TrimSpace(s))
	return nil
}

// Limits describes Slack's text size and send rate.
func (a *Adapter) Limits() channels.Limits { return limits }

// Receive runs until ctx ends or the credentials are refused. In events
// mode messages arrive through Ingress, so Receive only checks the token
// (auth.test) and waits; in socket mode it runs the WebSocket.
func (a *Adapter) Receive(ctx context.Context) error {
	a.deps.Status.SetState(channels.StateConnecting)
	if err := a.authenticate(ctx); err != nil {
		return err
	}
	if a.mode == ModeSocket {
		return a.receiveSocket(ctx)
	}
	a.deps.Status.SetState(channels.StateConnected)
	<-ctx.Done()
	a.deps.Status.SetState(channels.StateStopped)
	return ctx.Err()
}

// authenticate learns the bot's identity with auth.test, retrying
// transient failures with backoff until ctx ends; a refused token ends it
// with *channels.Unauthorized.
func (a *Adapter) authenticate(ctx context.Context) error {
	wait := time.Second
	for {
		err := a.identify(ctx)
		if err == nil {
			return nil
		}
		var unauth *channels.Unauthorized
		if errors.As(err, &unauth) || ctx.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		a.deps.Logf("slack channel %s: auth.test failed, retrying in %s: %v", a.deps.Settings.ID, wait, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// identify calls auth.test once and records the bot's user and bot ids.
func (a *Adapter) identify(ctx context.Context) error {
	res, err := a.api.AuthTestContext(ctx)
	if err != nil {
		err = a.mapError(err)
		a.deps.Status.SetError(err)
		return err
	}
	a.mu.Lock()
	a.botUserID, a.botID = res.UserID, res.BotID
	a.mu.Unlock()
	a.deps.Status.SetDetail("bot_user", res.UserID)
	a.deps.Status.SetDetail("bot_name", res.User)
	a.deps.Status.SetDetail("team", res.Team)
	return nil
}

// identity returns the bot's ids, asking auth.test when not yet known
// (Ingress may run before Receive did).
func (a *Adapter) identity(ctx context.Context) (userID, botID string, err error) {
	a.mu.Lock()
	userID, botID = a.botUserID, a.botID
	a.mu.Unlock()
	if userID != "" {
		return userID, botID, nil
	}
	if err := a.identify(ctx); err != nil {
		return "", "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botUserID, a.botID, nil
}

// Send posts one part of a reply with chat.postMessage, in the thread
// when the message came from one (Outbound.ThreadID); ReplyTo is not used
// (Slack has no quoted replies). The text is escaped (&, <, >) so the
// agent's words show as written and cannot form mentions or links.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	opts := []slack.MsgOption{slack.MsgOptionText(m.Text, true)}
	if m.ThreadID != "" {
		opts = append(opts, slack.MsgOptionTS(m.ThreadID))
	}
	_, ts, err := a.api.PostMessageContext(ctx, m.ChatID, opts...)
	if err != nil {
		return channels.Sent{}, a.mapError(err)
	}
	return channels.Sent{PlatformID: ts}, nil
}

// Slack's error codes for a refused token and for a message it will never
// take as it is.
var (
	unauthorizedCodes = map[string]bool{
		"invalid_auth": true, "not_authed": true, "token_revoked": true,
		"account_inactive": true, "token_expired": true, "no_permission": true,
		"org_login_required": true, "ekm_access_denied": true,
	}
	refusedCodes = map[string]bool{
		"channel_not_found": true, "not_in_channel": true, "is_archived": true,
		"msg_too_long": true, "no_text": true, "restricted_action": true,
		"cannot_reply_to_message": true, "restricted_action_read_only_channel": true,
		"restricted_action_thread_only_channel": true, "restricted_action_non_threadable_channel": true,
		"team_access_not_granted": true, "missing_scope": true, "invalid_blocks": true,
	}
)

// mapError turns slack-go's errors into the channels errors; a refused
// token also marks the status unauthorized.
func (a *Adapter) mapError(err error) error {
	if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
		return &channels.RateLimited{RetryAfter: rl.RetryAfter}
	}
	if sc, ok := errors.AsType[slack.StatusCodeError](err); ok {
		switch {
		case sc.Code == http.StatusTooManyRequests: // no Retry-After given
			return &channels.RateLimited{RetryAfter: time.Second}
		case sc.Code == http.StatusUnauthorized || sc.Code == http.StatusForbidden:
			return a.unauthorized(sc.Status)
		}
		return fmt.Errorf("slack answered %s", sc.Status)
	}
	if se, ok := errors.AsType[slack.SlackErrorResponse](err); ok {
		switch {
		case unauthorizedCodes[se.Err]:
			return a.unauthorized(se.Err)
		case refusedCodes[se.Err]:
			return &channels.Refused{Status: http.StatusBadRequest, Msg: se.Err}
		}
		return fmt.Errorf("slack: %s", se.Err)
	}
	return err
}

func (a *Adapter) unauthorized(msg string) error {
	err := &channels.Unauthorized{Msg: msg}
	a.deps.Status.SetState(channels.StateUnauthorized)
	a.deps.Status.SetError(err)
	return err
}
