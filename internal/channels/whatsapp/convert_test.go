package whatsapp

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/models"
)

var (
	self    = types.JID{User: "15550001111", Server: types.DefaultUserServer}
	selfLID = types.JID{User: "99887766", Server: types.HiddenUserServer}
	ann     = types.JID{User: "15552223333", Server: types.DefaultUserServer}
	group   = types.JID{User: "120363040000000000", Server: types.GroupServer}
	at      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// msg builds the event as whatsmeow does: the raw message unwrapped
// (ephemeral, edits, ...) by UnwrapRaw.
func msg(chat, sender types.JID, raw *waE2E.Message, mod func(*types.MessageInfo)) *events.Message {
	info := types.MessageInfo{
		MessageSource: types.MessageSource{Chat: chat, Sender: sender, IsGroup: chat.Server == types.GroupServer},
		ID:            "3EB0C0FFEE", PushName: "Ann", Timestamp: at, Type: "text",
	}
	if mod != nil {
		mod(&info)
	}
	return (&events.Message{Info: info, RawMessage: raw}).UnwrapRaw()
}

func TestMessagesBecomeInbound(t *testing.T) {
	withDevice := ann
	withDevice.Device = 3
	cases := []struct {
		name string
		evt  *events.Message
		want channels.Inbound
	}{
		{"direct text", msg(ann, withDevice, &waE2E.Message{Conversation: proto.String("hello")}, nil),
			channels.Inbound{MessageID: "3EB0C0FFEE", ChatID: "15552223333@s.whatsapp.net", ChatType: channels.ChatDirect,
				UserID: "15552223333", Username: "Ann", Text: "hello", ReplyTo: "3EB0C0FFEE", At: at}},
		{"group extended text mentioning the bot", msg(group, ann, &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
			Text:        proto.String("@15550001111 what is the weather"),
			ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{"15550001111@s.whatsapp.net"}},
		}}, nil),
			channels.Inbound{MessageID: "3EB0C0FFEE", ChatID: "120363040000000000@g.us", ChatType: channels.ChatGroup,
				UserID: "15552223333", Username: "Ann", Text: "what is the weather", Mentioned: true, ReplyTo: "3EB0C0FFEE", At: at}},
		{"group mention of the bot's LID, sender by LID", msg(group, types.JID{User: "4242", Server: types.HiddenUserServer},
			&waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text:        proto.String("hi @99887766"),
				ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{"99887766@lid"}},
			}}, func(i *types.MessageInfo) { i.SenderAlt = ann }),
			channels.Inbound{MessageID: "3EB0C0FFEE", ChatID: "120363040000000000@g.us", ChatType: channels.ChatGroup,
				UserID: "15552223333", Username: "Ann", Text: "hi", Mentioned: true, ReplyTo: "3EB0C0FFEE", At: at}},
		{"mention of someone else", msg(group, ann, &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
			Text:        proto.String("@15559999999 look"),
			ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{"15559999999@s.whatsapp.net"}},
		}}, nil),
			channels.Inbound{MessageID: "3EB0C0FFEE", ChatID: "120363040000000000@g.us", ChatType: channels.ChatGroup,
				UserID: "15552223333", Username: "Ann", Text: "@15559999999 look", ReplyTo: "3EB0C0FFEE", At: at}},
		{"image caption", msg(ann, ann, &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Caption: proto.String("what is this?"), Mimetype: proto.String("image/jpeg")}}, nil),
			channels.Inbound{MessageID: "3EB0C0FFEE", ChatID: "15552223333@s.whatsapp.net", ChatType: channels.ChatDirect,
				UserID: "15552223333", Username: "Ann", Text: "what is this?", ReplyTo: "3EB0C0FFEE", At: at}},
		{"video caption in a disappearing chat", msg(ann, ann, &waE2E.Message{EphemeralMessage: &waE2E.FutureProofMessage{Message: &waE2E.Message{
			VideoMessage: &waE2E.VideoMessage{Caption: proto.String("clip")}}}}, nil),
			channels.Inbound{MessageID: "3EB0C0FFEE", ChatID: "15552223333@s.whatsapp.net", ChatType: channels.ChatDirect,
				UserID: "15552223333", Username: "Ann", Text: "clip", ReplyTo: "3EB0C0FFEE", At: at}},
		{"from me", msg(ann, self, &waE2E.Message{Conversation: proto.String("my own")}, func(i *types.MessageInfo) { i.IsFromMe = true; i.PushName = "" }),
			channels.Inbound{MessageID: "3EB0C0FFEE", ChatID: "15552223333@s.whatsapp.net", ChatType: channels.ChatDirect,
				UserID: "15550001111", Text: "my own", FromSelf: true, ReplyTo: "3EB0C0FFEE", At: at}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ignored := toInbound(c.evt, self, selfLID)
			if ignored != "" {
				t.Fatalf("ignored: %s", ignored)
			}
			if got != c.want {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestNonTextMessagesAreIgnored(t *testing.T) {
	edit := msg(ann, ann, &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
		Type: waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(), EditedMessage: &waE2E.Message{Conversation: proto.String("edited")},
	}}, nil)
	cases := map[string]*events.Message{
		"edit": edit,
		"revoke": msg(ann, ann, &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
			Type: waE2E.ProtocolMessage_REVOKE.Enum(), Key: &waCommon.MessageKey{ID: proto.String("X")}}}, nil),
		"reaction":        msg(ann, ann, &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String("👍")}}, nil),
		"image only":      msg(ann, ann, &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Mimetype: proto.String("image/jpeg")}}, nil),
		"sticker":         msg(ann, ann, &waE2E.Message{StickerMessage: &waE2E.StickerMessage{}}, nil),
		"location":        msg(ann, ann, &waE2E.Message{LocationMessage: &waE2E.LocationMessage{}}, nil),
		"status":          msg(types.StatusBroadcastJID, ann, &waE2E.Message{Conversation: proto.String("my status")}, nil),
		"empty text":      msg(ann, ann, &waE2E.Message{Conversation: proto.String("   ")}, nil),
		"nil message":     {Info: types.MessageInfo{ID: "Y", MessageSource: types.MessageSource{Chat: ann, Sender: ann}}},
		"newsletter post": msg(types.JID{User: "1203", Server: types.NewsletterServer}, ann, &waE2E.Message{Conversation: proto.String("news")}, nil),
	}
	for name, evt := range cases {
		t.Run(name, func(t *testing.T) {
			got, ignored := toInbound(evt, self, selfLID)
			if ignored == "" {
				t.Fatalf("not ignored: %+v", got)
			}
			if got != (channels.Inbound{}) {
				t.Fatalf("ignored message still converted: %+v", got)
			}
		})
	}
}

// The handler hands a message to the sink synchronously, retries a sink
// failure and reports success to whatsmeow (which then sends the receipt)
// only after the sink accepted; ignored messages never reach the sink and
// log no text.
func TestHandlerAcknowledgesOnlyAfterTheSink(t *testing.T) {
	db, dialect := openGatewayDB(t, models.DriverSQLite)
	var calls atomic.Int32
	var got channels.Inbound
	sink := func(_ context.Context, m channels.Inbound) error {
		if calls.Add(1) == 1 {
			return errors.New("temporal unavailable")
		}
		got = m
		return nil
	}
	cur := &memCursors{}
	a, logs := newAdapter(t, db, dialect, cur, sink)
	storeDevice(t, a, cur, self.User)
	dev, err := a.device(context.Background())
	if err != nil || dev == nil {
		t.Fatal(dev, err)
	}
	cli := whatsmeow.NewClient(dev, nil)

	// Outside Receive: left unacknowledged for redelivery.
	if a.handle(cli, msg(ann, ann, &waE2E.Message{Conversation: proto.String("early")}, nil)) {
		t.Fatal("a message outside Receive was acknowledged")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.recvCtx = ctx
	if !a.handle(cli, msg(ann, ann, &waE2E.Message{Conversation: proto.String("hello")}, nil)) {
		t.Fatal("accepted message reported as failed")
	}
	if calls.Load() != 2 || got.Text != "hello" || got.MessageID != "3EB0C0FFEE" {
		t.Fatalf("sink calls %d, got %+v", calls.Load(), got)
	}
	v := a.deps.Status.View()
	if v.Received != 1 || !strings.Contains(v.LastError, "not accepted yet") {
		t.Fatalf("status %+v", v)
	}
	if !a.handle(cli, msg(ann, ann, &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String("secret-reaction")}}, nil)) {
		t.Fatal("ignored message not acknowledged")
	}
	if calls.Load() != 2 || a.deps.Status.View().Ignored != 1 {
		t.Fatalf("ignored message reached the sink (%d calls) or was not counted", calls.Load())
	}
	if l := logs.Text(); !strings.Contains(l, "reaction") || strings.Contains(l, "secret-reaction") || strings.Contains(l, "hello") {
		t.Fatalf("log lines: %s", l)
	}
	// A sink that never accepts: the handler gives up only when Receive
	// ends, without acknowledging.
	a.deps.Sink = func(context.Context, channels.Inbound) error { cancel(); return errors.New("down") }
	if a.handle(cli, msg(ann, ann, &waE2E.Message{Conversation: proto.String("later")}, nil)) {
		t.Fatal("message acknowledged although the sink never accepted it")
	}
}
