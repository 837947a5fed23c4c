package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack/slackevents"

	"github.com/agentryhq/agentry/internal/channels"
)

// callback is the outer JSON of an Events API delivery (the body of an
// events-mode POST, the payload of a socket-mode events_api envelope).
type callback struct {
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	EventID   string          `json:"event_id"`
	EventTime int64           `json:"event_time"`
	Event     json.RawMessage `json:"event"`
}

// Subtypes of message events that are a person (or a bot) saying
// something; every other subtype (message_changed, message_deleted,
// channel_join, channel_topic, ...) is a change to the channel, not a
// message to answer, and is ignored.
var sayingSubtypes = map[string]bool{
	"":                 true,
	"bot_message":      true, // passed on with FromBot set
	"thread_broadcast": true, // a thread reply also sent to the channel
	"file_share":       true, // a message with a file; its text is taken
	"me_message":       true, // /me ...
}

// handle maps one callback to an Inbound and hands it to the sink. It
// returns nil when the message was accepted or deliberately ignored
// (both are acknowledged to Slack) and the sink's error otherwise.
func (a *Adapter) handle(ctx context.Context, cb callback, retry string) error {
	id := a.deps.Settings.ID
	switch cb.Type {
	case slackevents.CallbackEvent:
	case slackevents.AppRateLimited:
		a.deps.Logf("slack channel %s: Slack rate-limits this app's event subscriptions (events are being dropped)", id)
		return nil
	default:
		a.deps.Logf("slack channel %s: ignored a %q callback", id, cb.Type)
		return nil
	}
	userID, botID, err := a.identity(ctx)
	if err != nil {
		return fmt.Errorf("learning the bot's identity: %w", err)
	}
	m, why := toInbound(cb.Event, userID, botID)
	if why != "" {
		a.deps.Status.Ignored()
		a.deps.Logf("slack channel %s: ignored event %s: %s", id, cb.EventID, why)
		return nil
	}
	if retry != "" {
		a.deps.Logf("slack channel %s: Slack redelivered event %s (%s); message %s joins its work", id, cb.EventID, retry, m.MessageID)
	}
	if a.deps.Sink == nil {
		return fmt.Errorf("slack channel %s has no sink in this process", id)
	}
	if err := a.deps.Sink(ctx, m); err != nil {
		a.deps.Status.SetError(fmt.Errorf("handing message %s over: %w", m.MessageID, err))
		return err
	}
	a.deps.Status.Received()
	return nil
}

// innerEvent holds the fields of message and app_mention events the
// adapter uses (slackevents' types, reduced to one shape).
type innerEvent struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	User        string `json:"user"`
	Username    string `json:"username"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
}

// toInbound maps a message or app_mention event; a non-empty reason means
// the event is ignored (and why, without the message's text).
func toInbound(raw json.RawMessage, botUserID, botID string) (channels.Inbound, string) {
	var ev innerEvent
	if len(raw) == 0 {
		return channels.Inbound{}, "no event in the callback"
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return channels.Inbound{}, "unreadable event: " + err.Error()
	}
	switch ev.Type {
	case string(slackevents.Message), string(slackevents.AppMention):
	default:
		return channels.Inbound{}, fmt.Sprintf("event type %q is not a message", ev.Type)
	}
	if !sayingSubtypes[ev.Subtype] {
		return channels.Inbound{}, fmt.Sprintf("message subtype %q (edits, deletions and channel changes are not answered)", ev.Subtype)
	}
	if ev.Channel == "" || ev.TS == "" {
		return channels.Inbound{}, "message without channel or ts"
	}
	text, mentioned := stripMention(ev.Text, botUserID)
	if text == "" {
		return channels.Inbound{}, fmt.Sprintf("message %s:%s has no text", ev.Channel, ev.TS)
	}
	m := channels.Inbound{
		MessageID: ev.Channel + ":" + ev.TS,
		ChatID:    ev.Channel,
		ThreadID:  ev.ThreadTS,
		ChatType:  chatType(ev.ChannelType, ev.Channel),
		UserID:    ev.User,
		Username:  ev.Username,
		Text:      text,
		Mentioned: mentioned || ev.Type == string(slackevents.AppMention),
		FromSelf:  (botUserID != "" && ev.User == botUserID) || (botID != "" && ev.BotID == botID),
		FromBot:   ev.Subtype == "bot_message" || ev.BotID != "",
		ReplyTo:   ev.TS,
		At:        tsTime(ev.TS),
	}
	if ev.ThreadTS != "" {
		m.ReplyTo = ev.ThreadTS
	}
	if m.UserID == "" {
		m.UserID = ev.BotID
	}
	return m, ""
}

// chatType maps Slack's channel_type; app_mention events carry none, so
// the channel id's prefix (D: a direct message) decides then.
func chatType(channelType, channel string) string {
	switch channelType {
	case "im":
		return channels.ChatDirect
	case "channel", "group", "mpim":
		return channels.ChatGroup
	case "":
		if strings.HasPrefix(channel, "D") {
			return channels.ChatDirect
		}
		return channels.ChatGroup
	}
	return channels.ChatGroup
}

var (
	mentionRE = regexp.MustCompile(`<@([A-Z0-9]+)(\|[^>]*)?>`)
	spacesRE  = regexp.MustCompile(`[ \t]{2,}`)
)

// stripMention removes the bot's mentions (<@U123> or <@U123|name>) and
// says whether there was one.
func stripMention(text, botUserID string) (string, bool) {
	mentioned := false
	if botUserID != "" {
		text = mentionRE.ReplaceAllStringFunc(text, func(s string) string {
			if mentionRE.FindStringSubmatch(s)[1] == botUserID {
				mentioned = true
				return ""
			}
			return s
		})
	}
	if mentioned {
		// The gap the mention leaves; newlines (code blocks) are kept.
		text = spacesRE.ReplaceAllString(text, " ")
	}
	return strings.TrimSpace(text), mentioned
}

// tsTime reads Slack's "seconds.micros" timestamp.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	var us int64
	if frac != "" {
		frac = (frac + "000000")[:6]
		us, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(s, us*1000).UTC()
}
