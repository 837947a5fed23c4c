package telegram

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/mymmrac/telego"

	"github.com/agentryhq/agentry/internal/channels"
)

// Reasons an update is not handed to the sink (counted as ignored and
// logged with one line, never with the message's text; the offset still
// advances past it). docs/channels/telegram.md lists them.
const (
	// An edit of a message: the original was already answered, and
	// answering every edit would answer one question many times.
	ignoreEdited = "edited message"
	// A post in a channel the bot administers: channels have no
	// conversation to answer in.
	ignoreChannelPost = "channel post"
	// Another update kind (not asked for, but tolerated).
	ignoreKind = "unsupported update kind"
	// A sticker, photo, voice note ... without a caption: no text for the
	// agent.
	ignoreSticker = "sticker"
	ignoreMedia   = "media without caption"
	// Members joined/left, title changed, pinned ...: not said by anyone.
	ignoreService = "service message"
	// A location, contact, poll or dice: no text.
	ignoreNoText = "message without text"
	// Text that is only white space.
	ignoreEmpty = "empty text"
)

// mapUpdate turns an update into an inbound message, or says why it is
// ignored. botID and username are the bot's own (from getMe).
func mapUpdate(u *telego.Update, botID int64, username string) (channels.Inbound, string) {
	switch {
	case u.EditedMessage != nil:
		return channels.Inbound{}, ignoreEdited
	case u.ChannelPost != nil:
		return channels.Inbound{}, ignoreChannelPost
	case u.Message == nil:
		return channels.Inbound{}, ignoreKind
	}
	m := u.Message
	text, ents := m.Text, m.Entities
	if text == "" && m.Caption != "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	if text == "" {
		return channels.Inbound{}, noTextReason(m)
	}
	if strings.TrimSpace(text) == "" {
		return channels.Inbound{}, ignoreEmpty
	}
	in := channels.Inbound{
		MessageID: messageID(botID, u.UpdateID),
		ChatID:    strconv.FormatInt(m.Chat.ID, 10),
		ChatType:  chatType(m.Chat.Type),
		ReplyTo:   strconv.Itoa(m.MessageID),
		At:        time.Unix(m.Date, 0).UTC(),
	}
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		in.ThreadID = strconv.Itoa(m.MessageThreadID)
	}
	switch {
	case m.From != nil:
		in.UserID = strconv.FormatInt(m.From.ID, 10)
		in.Username = m.From.Username
		if in.Username == "" {
			in.Username = m.From.FirstName
		}
		in.FromSelf = botID != 0 && m.From.ID == botID
		in.FromBot = m.From.IsBot && !in.FromSelf
	case m.SenderChat != nil:
		// Sent on behalf of a chat (an anonymous admin, a linked channel).
		in.UserID = strconv.FormatInt(m.SenderChat.ID, 10)
		in.Username = m.SenderChat.Username
		if in.Username == "" {
			in.Username = m.SenderChat.Title
		}
	}
	in.Text, in.Mentioned = stripMentions(text, ents, botID, username)
	if r := m.ReplyToMessage; r != nil && r.From != nil && botID != 0 && r.From.ID == botID {
		in.Mentioned = true
	}
	return in, ""
}

func chatType(t string) string {
	switch t {
	case telego.ChatTypePrivate:
		return channels.ChatDirect
	case telego.ChatTypeGroup, telego.ChatTypeSupergroup:
		return channels.ChatGroup
	default:
		return t
	}
}

func noTextReason(m *telego.Message) string {
	switch {
	case m.Sticker != nil:
		return ignoreSticker
	case len(m.Photo) > 0, m.Video != nil, m.Document != nil, m.Audio != nil, m.Voice != nil,
		m.Animation != nil, m.VideoNote != nil, m.PaidMedia != nil:
		return ignoreMedia
	case len(m.NewChatMembers) > 0, m.LeftChatMember != nil, m.NewChatTitle != "", len(m.NewChatPhoto) > 0,
		m.DeleteChatPhoto, m.GroupChatCreated, m.SupergroupChatCreated, m.ChannelChatCreated,
		m.MigrateToChatID != 0, m.MigrateFromChatID != 0, m.PinnedMessage != nil,
		m.MessageAutoDeleteTimerChanged != nil, m.ForumTopicCreated != nil, m.ForumTopicEdited != nil,
		m.ForumTopicClosed != nil, m.ForumTopicReopened != nil, m.VideoChatStarted != nil,
		m.VideoChatEnded != nil, m.VideoChatScheduled != nil, m.VideoChatParticipantsInvited != nil:
		return ignoreService
	default:
		return ignoreNoText
	}
}

// stripMentions finds mentions of the bot: a "mention" entity that is
// @username (case-insensitive; removed from the text, with one adjacent
// space) or a "text_mention" of the bot's id (kept: it is a name in the
// sentence). Entity offsets count UTF-16 code units, as Telegram does.
func stripMentions(text string, ents []telego.MessageEntity, botID int64, username string) (string, bool) {
	u := utf16.Encode([]rune(text))
	mentioned := false
	type span struct{ from, to int }
	var cut []span
	for _, e := range ents {
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(u) {
			continue
		}
		switch e.Type {
		case "mention":
			word := string(utf16.Decode(u[e.Offset : e.Offset+e.Length]))
			if username != "" && strings.EqualFold(word, "@"+username) {
				mentioned = true
				cut = append(cut, span{e.Offset, e.Offset + e.Length})
			}
		case "text_mention":
			if e.User != nil && botID != 0 && e.User.ID == botID {
				mentioned = true
			}
		}
	}
	if len(cut) == 0 {
		return text, mentioned
	}
	// Remove from the end so earlier offsets stay valid.
	for i := len(cut) - 1; i >= 0; i-- {
		from, to := cut[i].from, cut[i].to
		if to < len(u) && u[to] == ' ' && (from == 0 || u[from-1] == ' ') {
			to++ // "hey @bot you" → "hey you"
		}
		u = append(u[:from:from], u[to:]...)
	}
	return strings.TrimSpace(string(utf16.Decode(u))), mentioned
}

// messageID is an update's identity in the channel: update ids are per
// bot, so the bot's id comes first. A channel whose token changes to
// another bot then never mistakes a new update for an old one that
// happens to carry the same number (its work, keyed by this id, would be
// skipped as already done).
func messageID(botID int64, updateID int) string {
	return strconv.FormatInt(botID, 10) + "-" + strconv.Itoa(updateID)
}
