package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestChannelPairingCalls checks the routes, methods and query of the
// pairing and messages wrappers, and that a messaging channel's adapter
// and message counts decode into the generated types.
func TestChannelPairingCalls(t *testing.T) {
	var seen []string
	view := `{"id":"whatsapp","type":"whatsapp","enabled":true,"settings":{"bot_token":""},
		"adapter":{"state":"pairing","since":"2026-01-02T03:04:05Z","received":3,"detail":{"qr":"2@abc"}},
		"messages":{"received":5,"answered":4,"failed":1,"last_chat":"c1"},"status":{"last_delivery_at":null,"deliveries":2}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		switch r.URL.Path {
		case "/api/v1/channels/whatsapp/pair", "/api/v1/channels/whatsapp/unpair":
			fmt.Fprint(w, view)
		case "/api/v1/channels/telegram/messages":
			fmt.Fprint(w, `{"messages":[{"message_id":"u7","chat_id":"42","status":"answered","reply_ids":["9","10"],"received_at":"2026-01-02T03:04:05Z","answered_at":null}],"count":1}`)
		default:
			w.WriteHeader(404)
			fmt.Fprint(w, `{"error":"unknown channel: x"}`)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ch, err := c.PairChannel(ctx, "whatsapp")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Adapter.State != "pairing" || ch.Adapter.Detail["qr"] != "2@abc" || ch.Adapter.Since.IsZero() || ch.Messages.Failed != 1 || ch.Messages.LastChat != "c1" || ch.Status.Deliveries != 2 {
		t.Fatalf("pair view = %+v", ch.Channel)
	}
	if _, err := c.UnpairChannel(ctx, "whatsapp"); err != nil {
		t.Fatal(err)
	}
	l, err := c.ChannelMessages(ctx, "telegram", 7)
	if err != nil {
		t.Fatal(err)
	}
	if l.Count != 1 || len(l.Messages) != 1 || l.Messages[0].MessageID != "u7" || len(l.Messages[0].ReplyIds) != 2 || !l.Messages[0].AnsweredAt.IsZero() {
		t.Fatalf("messages = %+v", l.ChannelMessageList)
	}
	if _, err := c.ChannelMessages(ctx, "telegram", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ChannelMessages(ctx, "x", 0); !IsStatus(err, 404) {
		t.Fatalf("unknown channel: %v", err)
	}
	want := []string{"POST /api/v1/channels/whatsapp/pair", "POST /api/v1/channels/whatsapp/unpair",
		"GET /api/v1/channels/telegram/messages?limit=7", "GET /api/v1/channels/telegram/messages", "GET /api/v1/channels/x/messages"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("requests = %q\nwant %q", seen, want)
	}
}
