package models

import (
	"context"
	"testing"
	"time"
)

func TestChannelCursorsAndMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		if v, err := s.Cursor(ctx, "telegram/tg/offset"); err != nil || v != "" {
			t.Fatalf("an unset cursor: %q, %v", v, err)
		}
		for k, v := range map[string]string{"telegram/tg/offset": "5", "discord/dc/chat/1": "10", "discord/dc/chat/2": "20", "discord/dcx/chat/9": "1"} {
			if err := s.SetCursor(ctx, k, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetCursor(ctx, "telegram/tg/offset", "6"); err != nil {
			t.Fatal(err)
		}
		if v, _ := s.Cursor(ctx, "telegram/tg/offset"); v != "6" {
			t.Fatalf("cursor after update: %q", v)
		}
		keys, err := s.CursorKeys(ctx, "discord/dc/")
		if err != nil || len(keys) != 2 || keys[0] != "discord/dc/chat/1" || keys[1] != "discord/dc/chat/2" {
			t.Fatalf("keys with a prefix: %v, %v", keys, err)
		}
		now := time.Now().UTC()
		if err := s.RecordChannelMessage(ctx, &ChannelMessage{ChannelID: "tg", MessageID: "1", ChatID: "c", Status: ChannelMessageReceived, ReceivedAt: now}); err != nil {
			t.Fatal(err)
		}
		// The same message again (a redelivery) changes the row, not the count.
		if err := s.RecordChannelMessage(ctx, &ChannelMessage{ChannelID: "tg", MessageID: "1", ChatID: "c", Status: ChannelMessageAnswered, ReplyIDs: "77", AnsweredAt: &now, ReceivedAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordChannelMessage(ctx, &ChannelMessage{ChannelID: "tg", MessageID: "2", ChatID: "c", Status: ChannelMessageFailed, Error: "x", ReceivedAt: now.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		st, err := s.ChannelMessageStats(ctx, "tg")
		if err != nil || st.Received != 2 || st.Answered != 1 || st.Failed != 1 || st.Last == nil || st.Last.MessageID != "2" {
			t.Fatalf("stats: %+v, %v", st, err)
		}
		rows, err := s.ListChannelMessages(ctx, "tg", 10)
		if err != nil || len(rows) != 2 || rows[1].ReplyIDs != "77" {
			t.Fatalf("rows: %+v, %v", rows, err)
		}
		set, err := s.GetChannelSetting(ctx, "tg")
		if err != nil || set.Settings != "{}" {
			t.Fatalf("no settings: %+v, %v", set, err)
		}
		set.Settings, set.SecretKeys = `{"trigger":"bot"}`, "bot_token"
		if err := s.SaveChannelSetting(ctx, set); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetChannelSetting(ctx, "tg"); got.Settings != `{"trigger":"bot"}` || got.SecretKeys != "bot_token" {
			t.Fatalf("stored settings: %+v", got)
		}
	})
}
