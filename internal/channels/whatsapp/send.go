package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/fault"
)

// ErrNotConnected is Send without a logged-in connection in this process:
// unpaired, (re)connecting, or Receive running in another process. It is
// retryable (503).
var ErrNotConnected = &fault.Error{
	Kind: fault.KindUnavailable, Code: "channel_not_connected",
	Msg: "whatsapp: the device is not connected in this process (unpaired, reconnecting, or receiving elsewhere); retry later",
}

// rateLimitWait is the wait asked for after a WhatsApp rate limit, which
// says no duration.
const rateLimitWait = 30 * time.Second

// Send sends one text message through the receive connection. Replies are
// plain messages, not quotes: a WhatsApp quote needs the quoted message's
// content and, in groups, its sender, which Outbound does not carry.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	to, err := types.ParseJID(m.ChatID)
	if err != nil || to.User == "" || to.Server == "" {
		return channels.Sent{}, &channels.Refused{Status: 400, Msg: fmt.Sprintf("%q is not a WhatsApp chat JID", m.ChatID)}
	}
	if strings.TrimSpace(m.Text) == "" {
		return channels.Sent{}, &channels.Refused{Status: 400, Msg: "empty message text"}
	}
	if n := utf8.RuneCountInString(m.Text); n > a.Limits().MaxText {
		return channels.Sent{}, &channels.Refused{Status: 413, Msg: fmt.Sprintf("message of %d characters exceeds WhatsApp's %d", n, a.Limits().MaxText)}
	}
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	if cli == nil || !cli.IsLoggedIn() {
		return channels.Sent{}, ErrNotConnected
	}
	resp, err := cli.SendMessage(ctx, to.ToNonAD(), &waE2E.Message{Conversation: proto.String(m.Text)})
	if err != nil {
		return channels.Sent{}, classify(err)
	}
	return channels.Sent{PlatformID: resp.ID}, nil
}

// classify maps whatsmeow's send errors to the channel errors: rate
// limits to *RateLimited, requests WhatsApp will never take to *Refused,
// the rest (disconnects, timeouts, server errors) stay retryable.
func classify(err error) error {
	var disc *whatsmeow.DisconnectedError
	switch {
	case errors.Is(err, whatsmeow.ErrIQRateOverLimit), errors.Is(err, whatsmeow.ErrIQResourceLimit):
		return &channels.RateLimited{RetryAfter: rateLimitWait, Global: true}
	case errors.Is(err, whatsmeow.ErrNotConnected), errors.Is(err, whatsmeow.ErrNotLoggedIn),
		errors.As(err, &disc), errors.Is(err, whatsmeow.ErrMessageTimedOut), errors.Is(err, whatsmeow.ErrIQTimedOut):
		return fmt.Errorf("%w: %v", ErrNotConnected, err)
	case errors.Is(err, whatsmeow.ErrUnknownServer), errors.Is(err, whatsmeow.ErrRecipientADJID),
		errors.Is(err, whatsmeow.ErrBroadcastListUnsupported), errors.Is(err, whatsmeow.ErrNotInGroup),
		errors.Is(err, whatsmeow.ErrGroupNotFound), errors.Is(err, whatsmeow.ErrIQForbidden),
		errors.Is(err, whatsmeow.ErrIQNotFound), errors.Is(err, whatsmeow.ErrIQNotAcceptable):
		return &channels.Refused{Status: 400, Msg: err.Error()}
	}
	if code, ok := serverCode(err); ok {
		switch {
		case code == 429 || code == 419:
			return &channels.RateLimited{RetryAfter: rateLimitWait, Global: true}
		case code >= 400 && code < 500 && code != 408:
			return &channels.Refused{Status: code, Msg: err.Error()}
		}
	}
	return fmt.Errorf("whatsapp: send: %w", err)
}

// serverCode is the code of whatsmeow's "server returned error <code>"
// (the error attribute of the message's ack).
func serverCode(err error) (int, bool) {
	if !errors.Is(err, whatsmeow.ErrServerReturnedError) {
		return 0, false
	}
	f := strings.Fields(err.Error())
	if len(f) == 0 {
		return 0, false
	}
	n, e := strconv.Atoi(f[len(f)-1])
	return n, e == nil
}
