// Package channels connects agents to messaging platforms (Telegram,
// Slack, Discord, WhatsApp). Each platform is one adapter in its own
// folder (internal/channels/<platform>) behind the small Adapter
// interface below; this package holds what they share: the settings of a
// channel, the activation rules (who and what makes the agent answer),
// reply splitting and the send rate limits. Inbound messages become
// durable work through a Sink (a Temporal signal-with-start, see
// internal/channels/ingress.go), and replies are sent by activities.
package channels

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Adapter is one messaging platform account (a bot) as a channel.
//
// Receive and Send may run in different processes (the gateway receives,
// a worker sends), so an adapter keeps no state between them beyond what
// its Deps give it.
type Adapter interface {
	// Receive takes messages from the platform until ctx ends: long
	// polling, a WebSocket, or nothing (adapters fed only through
	// Ingress). Each message is handed to deps.Sink and acknowledged to
	// the platform (an offset stored, a 200) only after the sink returned
	// nil. Transient platform errors are retried inside Receive with
	// backoff (the receiver never stops on a 429 or a network error);
	// it returns only when ctx ends or the credentials are refused.
	Receive(ctx context.Context) error
	// Send sends one part of a reply (at most Limits().MaxText runes) and
	// returns the platform's id of the sent message. A platform rate
	// limit is a *RateLimited error, a request the platform will never
	// take (unknown chat, bot removed) a *Refused error.
	Send(ctx context.Context, m Outbound) (Sent, error)
	// Limits describes the platform's text size and send rates.
	Limits() Limits
}

// IngressHandler is implemented by adapters that receive platform
// callbacks over HTTP (Telegram webhook mode, Slack Events API). The
// gateway routes POST /ingress/<channel id> to it. The handler verifies
// the request by the platform's own scheme first: an unverified request
// gets 401 and reaches no sink.
type IngressHandler interface {
	Ingress(ctx context.Context, r IngressRequest) IngressResponse
}

// IngressRequest is a platform callback as received.
type IngressRequest struct {
	Header http.Header
	Body   []byte
	// Received is when the gateway read the request (signature windows).
	Received time.Time
}

// IngressResponse is what the platform is answered.
type IngressResponse struct {
	Status      int
	ContentType string
	Body        []byte
}

// Inbound is a platform message in the form every adapter produces.
type Inbound struct {
	// MessageID is the platform's own identity of the message, unique in
	// the channel (Telegram update_id, Slack channel+ts, Discord and
	// WhatsApp message ids). Redeliveries carry the same id: it keys the
	// durable work, so a message is answered once.
	MessageID string `json:"message_id"`
	// ChatID is the conversation (Telegram chat id, Slack/Discord channel
	// id, WhatsApp JID); ThreadID a thread in it ("" when none).
	ChatID   string `json:"chat_id"`
	ThreadID string `json:"thread_id,omitempty"`
	// ChatType is ChatDirect, ChatGroup, or another platform word
	// (unknown types are treated as groups: answered only when triggered).
	ChatType string `json:"chat_type"`
	UserID   string `json:"user_id"`
	Username string `json:"username,omitempty"`
	Text     string `json:"text"`
	// Mentioned is true when the message mentions the bot (entities,
	// <@U...>, @name); adapters strip the mention from Text.
	Mentioned bool `json:"mentioned,omitempty"`
	// FromSelf is true for the bot's own messages (never answered).
	FromSelf bool `json:"from_self,omitempty"`
	// FromBot is true for messages of other bots (never answered, so two
	// bots cannot talk each other into a loop).
	FromBot bool `json:"from_bot,omitempty"`
	// ReplyTo is the platform id the reply should quote or thread under
	// (Telegram message_id, Slack ts); "" when not applicable.
	ReplyTo string    `json:"reply_to,omitempty"`
	At      time.Time `json:"at"`
}

// Chat types.
const (
	ChatDirect = "direct"
	ChatGroup  = "group"
)

// Outbound is one part of a reply, or a message sent to a chat by a
// schedule or the API.
type Outbound struct {
	ChatID   string
	ThreadID string
	ReplyTo  string
	Text     string
	// Group is true for group chats (their stricter rate limit applies).
	Group bool
}

// Sent is a message the platform accepted.
type Sent struct {
	// PlatformID is the platform's id of the sent message.
	PlatformID string `json:"platform_id"`
}

// Limits are a platform's text size and rate limits.
type Limits struct {
	// MaxText is the longest message text in runes (Telegram 4096, Slack
	// 40000 but 4000 recommended, Discord 2000, WhatsApp 65536).
	MaxText int
	// PerChat is the least time between two messages to one chat.
	PerChat time.Duration
	// GroupPerMinute bounds messages to one group chat per minute (0:
	// only PerChat applies).
	GroupPerMinute int
	// PerBotPerSecond bounds all sends of one bot (0: unbounded).
	PerBotPerSecond float64
}

// Sink hands an inbound message over to durable processing. It returns
// nil once the message is safe (accepted by Temporal) or deliberately
// ignored; only then may the adapter acknowledge it to the platform.
type Sink func(ctx context.Context, m Inbound) error

// Cursors persists an adapter's receive position (Telegram's next update
// offset, Discord's last seen message id per chat) in the gateway's
// database.
type Cursors interface {
	// Cursor returns the stored value of key ("" when none).
	Cursor(ctx context.Context, key string) (string, error)
	// SetCursor stores value under key.
	SetCursor(ctx context.Context, key, value string) error
	// CursorKeys lists the keys stored with the prefix.
	CursorKeys(ctx context.Context, prefix string) ([]string, error)
}

// Deps is what an adapter is built with.
type Deps struct {
	Settings Settings
	// Sink receives inbound messages (nil in send-only processes: Receive
	// is then never called).
	Sink    Sink
	Cursors Cursors
	// HTTP is the client for platform API calls (timeouts set).
	HTTP *http.Client
	// Status records the adapter's state for GET /channels (never nil).
	Status *Status
	// Logf logs a line (no secrets in it).
	Logf func(format string, args ...any)
}

// Factory builds an adapter of one platform type.
type Factory func(deps Deps) (Adapter, error)

// RateLimited is a platform's "too many requests" with the wait it asked
// for (Telegram retry_after, Slack and Discord Retry-After).
type RateLimited struct {
	RetryAfter time.Duration
	// Global is true when the whole bot is limited, not only this chat.
	Global bool
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("the platform rate-limited the bot: retry after %s", e.RetryAfter)
}

// Refused is a request the platform will never accept as it is (chat not
// found, bot blocked or removed, message too long): not retried.
type Refused struct {
	Status int
	Msg    string
}

func (e *Refused) Error() string {
	return fmt.Sprintf("the platform refused the message (%d): %s", e.Status, e.Msg)
}

// Unauthorized is the platform refusing the bot's credentials. Receive
// returns it (and the channel's status says so); retrying cannot help
// until the token changes.
type Unauthorized struct{ Msg string }

func (e *Unauthorized) Error() string { return "the platform refused the bot's credentials: " + e.Msg }

// Pairer is implemented by QR-paired adapters (WhatsApp Web multi-device).
type Pairer interface {
	// StartPairing begins pairing a new device and returns at once. While
	// it runs, the Status is StatePairing with the QR code's text in
	// detail "qr" (replaced as the platform rotates codes); it ends
	// StatePaired (detail "jid") or with the error in the status. ctx
	// bounds the whole pairing. A paired adapter answers an error
	// (unpair first).
	StartPairing(ctx context.Context) error
	// Unpair logs the device out and forgets it.
	Unpair(ctx context.Context) error
}
