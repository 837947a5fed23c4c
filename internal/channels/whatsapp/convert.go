package whatsapp

import (
	"strings"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/agentryhq/agentry/internal/channels"
)

// toInbound converts a message event, as whatsmeow emits it, into the
// channel's Inbound. self and selfLID are this device's account (phone
// number JID and hidden-user LID; either may be empty): a mention of
// either sets Mentioned and is stripped from the text.
//
// When the message is not something an agent answers, ignored says why
// (for the log line; it never quotes the message text) and the Inbound is
// zero: status broadcasts, newsletters, edits and other protocol messages
// (revokes, ephemeral settings), reactions, media without a caption and
// message types without text (stickers, locations, polls, contacts).
func toInbound(evt *events.Message, self, selfLID types.JID) (in channels.Inbound, ignored string) {
	info := evt.Info
	switch {
	case info.Chat == types.StatusBroadcastJID || info.Chat.Server == types.BroadcastServer:
		return in, "status or broadcast list"
	case info.Chat.Server == types.NewsletterServer:
		return in, "newsletter"
	case evt.Message == nil:
		return in, "empty message"
	case evt.IsEdit || evt.Message.GetProtocolMessage() != nil || evt.Message.GetEditedMessage() != nil:
		return in, "edit or protocol message"
	case evt.Message.GetReactionMessage() != nil:
		return in, "reaction"
	}
	text, ctxInfo := textOf(evt.Message)
	if strings.TrimSpace(text) == "" {
		if hasMedia(evt.Message) {
			return in, "media without caption"
		}
		return in, "no text (unsupported message type)"
	}
	mentioned := false
	for _, jid := range ctxInfo.GetMentionedJID() {
		if isSelf(jid, self, selfLID) {
			mentioned = true
		}
	}
	if mentioned {
		for _, j := range []types.JID{self, selfLID} {
			if j.User != "" {
				text = strings.ReplaceAll(text, "@"+j.User, "")
			}
		}
		text = strings.Join(strings.Fields(text), " ")
	}
	chatType := channels.ChatDirect
	if info.IsGroup {
		chatType = channels.ChatGroup
	}
	return channels.Inbound{
		MessageID: info.ID,
		ChatID:    info.Chat.String(),
		ChatType:  chatType,
		UserID:    userOf(info.MessageSource),
		Username:  info.PushName,
		Text:      text,
		Mentioned: mentioned,
		FromSelf:  info.IsFromMe,
		FromBot:   info.Sender.IsBot(),
		ReplyTo:   info.ID,
		At:        info.Timestamp,
	}, ""
}

// userOf is the sender's phone number: Sender.User, or, when WhatsApp
// addressed the sender by hidden-user id (LID, common in groups) and also
// sent the phone number JID (SenderAlt), that number, so allowed_users can
// list phone numbers. A sender known only by LID is its LID user part.
func userOf(src types.MessageSource) string {
	s := src.Sender.ToNonAD()
	if s.Server == types.HiddenUserServer && src.SenderAlt.Server == types.DefaultUserServer {
		return src.SenderAlt.ToNonAD().User
	}
	return s.User
}

// textOf returns the message's text (a plain conversation, an extended
// text, or a media caption) and the context info that carries mentions.
func textOf(m *waE2E.Message) (string, *waE2E.ContextInfo) {
	switch {
	case m.GetConversation() != "":
		return m.GetConversation(), nil
	case m.GetExtendedTextMessage() != nil:
		return m.GetExtendedTextMessage().GetText(), m.GetExtendedTextMessage().GetContextInfo()
	case m.GetImageMessage() != nil:
		return m.GetImageMessage().GetCaption(), m.GetImageMessage().GetContextInfo()
	case m.GetVideoMessage() != nil:
		return m.GetVideoMessage().GetCaption(), m.GetVideoMessage().GetContextInfo()
	case m.GetDocumentMessage() != nil:
		return m.GetDocumentMessage().GetCaption(), m.GetDocumentMessage().GetContextInfo()
	}
	return "", nil
}

func hasMedia(m *waE2E.Message) bool {
	return m.GetImageMessage() != nil || m.GetVideoMessage() != nil || m.GetAudioMessage() != nil ||
		m.GetDocumentMessage() != nil || m.GetStickerMessage() != nil || m.GetPtvMessage() != nil
}

// isSelf reports whether the mentioned JID string names this account.
func isSelf(mentioned string, self, selfLID types.JID) bool {
	j, err := types.ParseJID(mentioned)
	if err != nil {
		return false
	}
	j = j.ToNonAD()
	for _, s := range []types.JID{self, selfLID} {
		if s.User != "" && j.User == s.User && j.Server == s.Server {
			return true
		}
	}
	return false
}
