package telegram

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/faketelegram"
	"github.com/agentryhq/agentry/internal/channels"
)

// Every kind of message, through the real wire format and library: what
// reaches the sink, how it is mapped, and what is ignored (counted,
// logged without its text, offset advanced past it).
func TestMappingMentionsSelfBotsAndIgnoredUpdates(t *testing.T) {
	e := newEnv(t, nil)
	f := e.fake
	bot := "@" + f.Username()
	// A message of the bot's in the group, to reply to.
	f.AddMessage(-100, "supergroup", 7, "warm-up")
	sent, err := e.a.Send(context.Background(), channels.Outbound{ChatID: "-100", Text: "I am the bot", Group: true})
	if err != nil {
		t.Fatal(err)
	}
	botMsg, _ := strconv.ParseInt(sent.PlatformID, 10, 64)

	type want struct {
		text                         string
		mentioned, fromSelf, fromBot bool
		chatType, user               string
	}
	cases := map[int64]want{}
	add := func(w want, chatType string, from int64, text string, opts ...faketelegram.MessageOption) {
		cases[f.AddMessage(-100, chatType, from, text, opts...)] = w
	}
	g := channels.ChatGroup
	add(want{text: "what time is it", mentioned: true, chatType: g, user: "7"}, "supergroup", 7, bot+" what time is it")
	add(want{text: "hey you", mentioned: true, chatType: g, user: "7"}, "supergroup", 7, "hey "+strings.ToUpper(bot)+" you")
	add(want{text: "🙂 hi", mentioned: true, chatType: g, user: "7"}, "supergroup", 7, "🙂 "+bot+" hi")
	add(want{text: "ask @someone_else", chatType: g, user: "7"}, "supergroup", 7, "ask @someone_else")
	add(want{text: "yes please", mentioned: true, chatType: g, user: "7"}, "supergroup", 7, "yes please", faketelegram.ReplyTo(botMsg))
	add(want{text: "Agentry, hello", mentioned: true, chatType: g, user: "7"}, "supergroup", 7, "Agentry, hello", faketelegram.TextMention(f.ID(), 0, 7))
	add(want{text: "my own echo", fromSelf: true, chatType: g, user: strconv.FormatInt(f.ID(), 10)}, "supergroup", f.ID(), "my own echo", faketelegram.IsBot())
	add(want{text: "beep", fromBot: true, chatType: g, user: "55"}, "supergroup", 55, "beep", faketelegram.IsBot())
	add(want{text: "look at this", chatType: g, user: "7"}, "supergroup", 7, "look at this", faketelegram.Caption())
	add(want{text: "plain group", chatType: g, user: "7"}, "group", 7, "plain group")
	add(want{text: "odd chat", chatType: "secret", user: "7"}, "secret", 7, "odd chat")
	ignored := []int64{
		f.AddMessage(-100, "supergroup", 7, "fixed typo", faketelegram.Edited()),
		f.AddMessage(-100, "supergroup", 7, "", faketelegram.Sticker()),
		f.AddMessage(-100, "supergroup", 7, "", faketelegram.Photo()),
		f.AddMessage(-100, "supergroup", 7, "", faketelegram.Service()),
		f.AddMessage(-100, "supergroup", 7, "  \n "),
		f.AddMessage(-100, "channel", 0, "channel news", faketelegram.ChannelPost()),
	}
	last := f.AddMessage(-100, "supergroup", 7, "the end")
	e.receive()
	waitFor(t, "the last message", func() bool {
		got := e.rec.got()
		return len(got) > 0 && got[len(got)-1].Text == "the end"
	})
	got := map[int64]channels.Inbound{}
	for _, m := range e.rec.got() {
		id := updateOf(m.MessageID)
		got[id] = m
	}
	for id, w := range cases {
		m, ok := got[id]
		if !ok {
			t.Errorf("update %d (%q) did not reach the sink", id, w.text)
			continue
		}
		if m.Text != w.text || m.Mentioned != w.mentioned || m.FromSelf != w.fromSelf || m.FromBot != w.fromBot ||
			m.ChatType != w.chatType || m.UserID != w.user || m.ChatID != "-100" {
			t.Errorf("update %d mapped to %+v, want %+v", id, m, w)
		}
	}
	for _, id := range ignored {
		if _, ok := got[id]; ok {
			t.Errorf("update %d should have been ignored", id)
		}
	}
	// 1 warm-up + the cases + the end.
	if n := len(e.rec.got()); n != len(cases)+2 {
		t.Errorf("sink got %d messages, want %d", n, len(cases)+2)
	}
	if v := e.deps.Status.View(); v.Ignored != int64(len(ignored)) {
		t.Errorf("status ignored %d, want %d", v.Ignored, len(ignored))
	}
	waitFor(t, "the offset past everything", func() bool { return f.ConfirmedOffset() == last+1 })
	logs := e.logs.Text()
	for _, reason := range []string{ignoreEdited, ignoreSticker, ignoreMedia, ignoreService, ignoreEmpty, ignoreChannelPost} {
		if !strings.Contains(logs, "ignored: "+reason) {
			t.Errorf("no log line for %q in:\n%s", reason, logs)
		}
	}
	if strings.Contains(logs, "fixed typo") || strings.Contains(logs, "channel news") {
		t.Error("a log line carries message text")
	}
}

func TestThreadIDFromTopicMessages(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.AddMessage(-200, "supergroup", 7, "in a topic", faketelegram.Thread(42))
	e.fake.AddMessage(-200, "supergroup", 7, "in general")
	e.receive()
	waitFor(t, "two messages", func() bool { return len(e.rec.got()) == 2 })
	got := e.rec.got()
	if got[0].ThreadID != "42" || got[1].ThreadID != "" {
		t.Fatalf("thread ids %q %q, want 42 and none", got[0].ThreadID, got[1].ThreadID)
	}
}

func TestStripMentionsCountsUTF16(t *testing.T) {
	// "𝄞" is one rune but two UTF-16 units: a rune-based offset would cut
	// the wrong characters.
	text := "𝄞 @bot go"
	ents := mentionEntities(t, text)
	got, ok := stripMentions(text, ents, 1, "bot")
	if !ok || got != "𝄞 go" {
		t.Fatalf("got %q %v", got, ok)
	}
	if got, ok := stripMentions("@bot", mentionEntities(t, "@bot"), 1, "bot"); !ok || got != "" {
		t.Fatalf("mention only: %q %v", got, ok)
	}
	// A bad entity (past the end) is skipped, not a crash.
	if got, ok := stripMentions("hi", mentionEntities(t, "hi @bot")[:1], 1, "bot"); ok || got != "hi" {
		t.Fatalf("bad entity: %q %v", got, ok)
	}
}
