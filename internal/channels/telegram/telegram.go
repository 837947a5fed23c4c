// Package telegram is the Telegram channel adapter, on the telego client
// library (its net/http caller, with the gateway's HTTP client). It
// receives by long polling (default: works behind NAT) or by webhook
// (Telegram POSTs to /ingress/<channel id>, checked by secret_token) and
// sends plain-text messages. See docs/channels/telegram.md.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mymmrac/telego"
	ta "github.com/mymmrac/telego/telegoapi"

	"github.com/agentryhq/agentry/internal/channels"
)

// Receive modes.
const (
	ModePolling = "polling"
	ModeWebhook = "webhook"
)

// DefaultAPIBaseURL is Telegram's own Bot API root.
const DefaultAPIBaseURL = "https://api.telegram.org"

// pollTimeout is getUpdates' long-poll timeout.
const pollTimeout = 25 * time.Second

// allowedUpdates are the update kinds asked for: new messages, plus the
// two kinds that are ignored with a log line (so the log says why a user
// got no answer instead of Telegram silently not sending them).
var allowedUpdates = []string{telego.MessageUpdates, telego.EditedMessageUpdates, telego.ChannelPostUpdates}

// tokenRe is the shape of a bot token (the library refuses others).
var tokenRe = regexp.MustCompile(`^\d+:[\w-]{35}$`)

// Adapter is one Telegram bot as a channel.
type Adapter struct {
	deps  channels.Deps
	mode  string
	bot   *telego.Bot
	token string

	// Backoff bounds for transient failures (tests shorten them).
	backoffMin, backoffMax time.Duration

	meMu     sync.Mutex
	botID    int64
	username string
}

// Interfaces the adapter implements.
var (
	_ channels.Adapter        = (*Adapter)(nil)
	_ channels.IngressHandler = (*Adapter)(nil)
	_ channels.Factory        = New
)

// New builds a Telegram adapter from the channel's settings (a
// channels.Factory).
func New(deps channels.Deps) (channels.Adapter, error) {
	s := deps.Settings
	if s.BotToken == "" {
		return nil, fmt.Errorf("telegram channel %q: bot_token is required (from @BotFather)", s.ID)
	}
	if !tokenRe.MatchString(s.BotToken) {
		return nil, fmt.Errorf("telegram channel %q: bot_token is not a Telegram bot token (<digits>:<35 characters>)", s.ID)
	}
	mode := s.Mode
	switch mode {
	case "", ModePolling:
		mode = ModePolling
	case ModeWebhook:
		if s.PublicURL == "" {
			return nil, fmt.Errorf("telegram channel %q: webhook mode needs public_url (where Telegram reaches /ingress/%s)", s.ID, s.ID)
		}
		if s.SecretToken == "" {
			return nil, fmt.Errorf("telegram channel %q: webhook mode needs secret_token (1-256 of A-Z a-z 0-9 _ -)", s.ID)
		}
	default:
		return nil, fmt.Errorf("telegram channel %q: mode %q is not polling or webhook", s.ID, s.Mode)
	}
	base := strings.TrimRight(s.APIBaseURL, "/")
	if base == "" {
		base = DefaultAPIBaseURL
	}
	client := deps.HTTP
	if client == nil {
		client = &http.Client{Timeout: pollTimeout + 15*time.Second}
	}
	if deps.Logf == nil {
		deps.Logf = func(string, ...any) {}
	}
	if deps.Status == nil {
		deps.Status = &channels.Status{}
	}
	caller := scrubCaller{next: ta.HTTPCaller{Client: client}, token: s.BotToken}
	// Library logging off: its debug log prints requests; errors are
	// reported by the adapter, scrubbed.
	bot, err := telego.NewBot(s.BotToken, telego.WithAPIServer(base), telego.WithAPICaller(caller), telego.WithDiscardLogger())
	if err != nil {
		return nil, fmt.Errorf("telegram channel %q: %s", s.ID, scrub(err.Error(), s.BotToken))
	}
	return &Adapter{deps: deps, mode: mode, bot: bot, token: s.BotToken, backoffMin: time.Second, backoffMax: 30 * time.Second}, nil
}

// Limits are Telegram's: 4096 characters a message, about one message a
// second per chat, 20 a minute per group, 30 a second per bot.
func (a *Adapter) Limits() channels.Limits {
	return channels.Limits{MaxText: 4096, PerChat: time.Second, GroupPerMinute: 20, PerBotPerSecond: 30}
}

// Send sends one plain-text message (no parse_mode: an agent's text is
// never interpreted as markup). A reply quotes ReplyTo with
// allow_sending_without_reply, so a deleted original does not fail it.
// The library makes one request: no retries or sleeps of its own.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	chat, err := chatID(m.ChatID)
	if err != nil {
		return channels.Sent{}, err
	}
	p := &telego.SendMessageParams{ChatID: chat, Text: m.Text}
	if m.ThreadID != "" {
		n, err := strconv.Atoi(m.ThreadID)
		if err != nil {
			return channels.Sent{}, &channels.Refused{Status: http.StatusBadRequest, Msg: "thread id " + strconv.Quote(m.ThreadID) + " is not a Telegram message_thread_id"}
		}
		p.MessageThreadID = n
	}
	if m.ReplyTo != "" {
		if n, err := strconv.Atoi(m.ReplyTo); err == nil && n > 0 {
			p.ReplyParameters = &telego.ReplyParameters{MessageID: n, AllowSendingWithoutReply: true}
		}
	}
	msg, err := a.bot.SendMessage(ctx, p)
	if err != nil {
		return channels.Sent{}, a.classify(err)
	}
	return channels.Sent{PlatformID: strconv.Itoa(msg.MessageID)}, nil
}

// chatID reads a chat id: a number, or @channelusername.
func chatID(s string) (telego.ChatID, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return telego.ChatID{ID: n}, nil
	}
	if strings.HasPrefix(s, "@") && len(s) > 1 {
		return telego.ChatID{Username: s}, nil
	}
	return telego.ChatID{}, &channels.Refused{Status: http.StatusBadRequest, Msg: "chat id " + strconv.Quote(s) + " is not a Telegram chat id or @channel"}
}

// classify maps a Telegram error answer to the channels error types:
// 429 → RateLimited (retry_after), 401 (and 404, Telegram's answer to a
// token of the wrong shape) → Unauthorized, other 4xx (chat not found,
// blocked, kicked, too long) → Refused. Anything else (network, 5xx)
// stays a plain, retryable error with the token scrubbed.
func (a *Adapter) classify(err error) error {
	var api *ta.Error
	if errors.As(err, &api) {
		switch {
		case api.ErrorCode == http.StatusTooManyRequests:
			ra := 0
			if api.Parameters != nil {
				ra = api.Parameters.RetryAfter
			}
			return &channels.RateLimited{RetryAfter: time.Duration(ra) * time.Second}
		case api.ErrorCode == http.StatusUnauthorized || api.ErrorCode == http.StatusNotFound:
			return &channels.Unauthorized{Msg: fmt.Sprintf("%d %s", api.ErrorCode, api.Description)}
		case api.ErrorCode >= 400 && api.ErrorCode < 500:
			return &channels.Refused{Status: api.ErrorCode, Msg: api.Description}
		}
	}
	return &scrubbedError{msg: scrub(err.Error(), a.token), cause: err}
}

// scrubCaller is the library's HTTP caller with the bot token removed
// from every error text (net/http errors quote the URL, which holds it).
type scrubCaller struct {
	next  ta.Caller
	token string
}

func (c scrubCaller) Call(ctx context.Context, url string, data *ta.RequestData) (*ta.Response, error) {
	resp, err := c.next.Call(ctx, url, data)
	if err != nil {
		return nil, &scrubbedError{msg: scrub(err.Error(), c.token), cause: err}
	}
	return resp, nil
}

// scrubbedError carries a cause (for errors.Is: context ends) under a
// message without the token.
type scrubbedError struct {
	msg   string
	cause error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.cause }

func scrub(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "<bot_token>")
}
