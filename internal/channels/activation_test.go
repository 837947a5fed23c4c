package channels

import (
	"strings"
	"testing"
)

func TestActivationRules(t *testing.T) {
	group := Settings{AllowGroups: true, Trigger: "hey bot"}
	cases := []struct {
		name   string
		s      Settings
		m      Inbound
		answer bool
		text   string
	}{
		{"direct", Settings{}, Inbound{ChatType: ChatDirect, Text: " hi "}, true, "hi"},
		{"own message", Settings{}, Inbound{ChatType: ChatDirect, Text: "hi", FromSelf: true}, false, ""},
		{"another bot", Settings{}, Inbound{ChatType: ChatDirect, Text: "hi", FromBot: true}, false, ""},
		{"no text", Settings{}, Inbound{ChatType: ChatDirect, Text: "  "}, false, ""},
		{"group off", Settings{Trigger: "hey bot"}, Inbound{ChatType: ChatGroup, Text: "hey bot hi", Mentioned: true}, false, ""},
		{"group without trigger", group, Inbound{ChatType: ChatGroup, Text: "just talking"}, false, ""},
		{"group trigger stripped", group, Inbound{ChatType: ChatGroup, Text: "Hey Bot, what time is it?"}, true, "what time is it?"},
		{"trigger mid-text", group, Inbound{ChatType: ChatGroup, Text: "so hey bot: status"}, true, "so status"},
		{"trigger alone", group, Inbound{ChatType: ChatGroup, Text: "hey bot"}, false, ""},
		{"group mention", group, Inbound{ChatType: ChatGroup, Text: "are you there", Mentioned: true}, true, "are you there"},
		{"unknown chat type is a group", group, Inbound{ChatType: "channel", Text: "no trigger"}, false, ""},
		{"user not allowed", Settings{AllowedUsers: []string{"1"}}, Inbound{ChatType: ChatDirect, UserID: "2", Text: "hi"}, false, ""},
		{"user allowed by name", Settings{AllowedUsers: []string{"ann"}}, Inbound{ChatType: ChatDirect, UserID: "2", Username: "ann", Text: "hi"}, true, "hi"},
		{"chat not allowed", Settings{AllowedChats: []string{"9"}}, Inbound{ChatType: ChatDirect, ChatID: "8", Text: "hi"}, false, ""},
	}
	for _, c := range cases {
		d := Activate(c.s, c.m)
		if d.Answer != c.answer || d.Text != c.text || (!d.Answer && d.Reason == "") {
			t.Errorf("%s: %+v, want answer %v text %q", c.name, d, c.answer, c.text)
		}
	}
}

func TestSplitKeepsPartsUnderTheLimitAtNaturalBreaks(t *testing.T) {
	if got := Split("  ", 10); got != nil {
		t.Fatalf("empty: %q", got)
	}
	text := strings.Repeat("word ", 30) + "\n\n" + strings.Repeat("é", 25)
	parts := Split(text, 40)
	var joined []string
	for _, p := range parts {
		if n := len([]rune(p)); n > 40 || n == 0 {
			t.Fatalf("part of %d runes: %q", n, p)
		}
		joined = append(joined, p)
	}
	if strings.Join(strings.Fields(strings.Join(joined, " ")), " ") != strings.Join(strings.Fields(text), " ") {
		t.Fatal("splitting lost or changed words")
	}
	if parts[len(parts)-1] != strings.Repeat("é", 25) {
		t.Fatalf("the paragraph break was not used: %q", parts[len(parts)-1])
	}
	// A word longer than the limit is cut hard, at rune boundaries.
	if p := Split(strings.Repeat("ж", 25), 10); len(p) != 3 || p[0] != strings.Repeat("ж", 10) {
		t.Fatalf("long word: %q", p)
	}
}

func TestCapTextCutsAtARuneBoundary(t *testing.T) {
	long := strings.Repeat("ж", MaxInboundText) // 2 bytes each
	got := capText(long)
	if len(got) > MaxInboundText || !strings.HasPrefix(long, got) || len(got) < MaxInboundText-1 {
		t.Fatalf("cut to %d bytes", len(got))
	}
	if capText("short") != "short" {
		t.Fatal("short text changed")
	}
}
