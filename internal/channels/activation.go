package channels

import (
	"slices"
	"strings"
)

// Decision is what the activation rules make of an inbound message.
type Decision struct {
	// Answer is true when the agent should answer.
	Answer bool
	// Text is the message as the agent sees it (the trigger phrase
	// stripped).
	Text string
	// Reason says why a message is not answered (for the log line and the
	// channel's counters).
	Reason string
}

// Activate applies a channel's activation rules (docs/channels.md):
//
//   - the bot's own messages and other bots' never answer (no loops);
//   - empty text never answers;
//   - allowed_users, when set, must list the sender; allowed_chats, when
//     set, must list the chat;
//   - direct messages answer;
//   - group messages (and unknown chat types) answer only with
//     allow_groups, and then only when they mention the bot or carry the
//     trigger phrase, which is stripped.
func Activate(s Settings, m Inbound) Decision {
	switch {
	case m.FromSelf:
		return Decision{Reason: "the bot's own message"}
	case m.FromBot:
		return Decision{Reason: "a message of another bot"}
	}
	text := strings.TrimSpace(m.Text)
	if text == "" {
		return Decision{Reason: "no text"}
	}
	if len(s.AllowedUsers) > 0 && !slices.Contains(s.AllowedUsers, m.UserID) && !slices.Contains(s.AllowedUsers, m.Username) {
		return Decision{Reason: "sender not in allowed_users"}
	}
	if len(s.AllowedChats) > 0 && !slices.Contains(s.AllowedChats, m.ChatID) {
		return Decision{Reason: "chat not in allowed_chats"}
	}
	if m.ChatType == ChatDirect {
		return Decision{Answer: true, Text: text}
	}
	if !s.AllowGroups {
		return Decision{Reason: "group messages are off (allow_groups)"}
	}
	if stripped, ok := stripTrigger(text, s.Trigger); ok {
		if stripped == "" {
			return Decision{Reason: "only the trigger phrase"}
		}
		return Decision{Answer: true, Text: stripped}
	}
	if m.Mentioned {
		return Decision{Answer: true, Text: text}
	}
	return Decision{Reason: "group message without the trigger or a mention"}
}

// stripTrigger removes the trigger phrase (case-insensitive, anywhere in
// the text, first occurrence) and the punctuation that joined it ("bot,
// what's up" -> "what's up").
func stripTrigger(text, trigger string) (string, bool) {
	trigger = strings.TrimSpace(trigger)
	if trigger == "" {
		return text, false
	}
	i := strings.Index(strings.ToLower(text), strings.ToLower(trigger))
	if i < 0 {
		return text, false
	}
	rest := strings.TrimLeft(text[i+len(trigger):], " ,:;.!?-")
	out := strings.TrimSpace(strings.TrimSpace(text[:i]) + " " + rest)
	return out, true
}
