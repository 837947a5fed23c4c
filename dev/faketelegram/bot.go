package faketelegram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
)

// Bot is one fake bot account: its pending updates, chats, sent messages
// and webhook. Safe for concurrent use.
type Bot struct {
	srv      *Server
	id       int64
	username string

	mu           sync.Mutex
	wake         chan struct{} // closed (and replaced) on every change
	updates      []*update     // pending, in update_id order
	nextUpdateID int64
	confirmed    int64
	chats        map[int64]*chat
	sent         []SentMessage
	calls        map[string]int

	failSends, failGets           int
	failSendsRetry, failGetsRetry int

	hook hookState
}

type update struct {
	id   int64
	kind string // message, edited_message, channel_post
	body map[string]any
}

type chat struct {
	typ     string
	nextMsg int64
	msgs    map[int64]map[string]any
	blocked bool
}

type hookState struct {
	url, secret string
	allowed     []string
	gen         int // bumped on every set/delete: stops the old deliverer
	delivered   int
	failed      int
	lastError   string
}

// Update ids start at a random number, as Telegram's do, so fakes in one
// test process (sharing one Temporal server) do not hand out the same
// ids.

// RedeliveryDelay is how long the fake waits before redelivering an update
// the webhook did not answer with a 2xx (Telegram waits longer).
const RedeliveryDelay = 20 * time.Millisecond

func newBot(s *Server, id int64, username string) *Bot {
	return &Bot{srv: s, id: id, username: username, wake: make(chan struct{}), nextUpdateID: 1000 + rand.Int64N(1_000_000_000),
		chats: map[int64]*chat{}, calls: map[string]int{}}
}

// ID is the bot's user id; Username its @name without the @.
func (b *Bot) ID() int64        { return b.id }
func (b *Bot) Username() string { return b.username }

func (b *Bot) wakeLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

func (b *Bot) me() map[string]any {
	return map[string]any{"id": b.id, "is_bot": true, "first_name": "Agentry Test", "username": b.username,
		"can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false}
}

// MessageOption changes a message AddMessage adds.
type MessageOption func(*msgSpec)

type msgSpec struct {
	username, firstName string
	isBot               bool
	thread              int64
	replyTo             int64
	caption             bool
	sticker, photo      bool
	service             bool
	edited              bool
	channelPost         bool
	textMention         *[3]int64 // user id, offset, length (UTF-16)
}

// Username sets the sender's @username (without @).
func Username(name string) MessageOption { return func(m *msgSpec) { m.username = name } }

// FirstName sets the sender's first name (default "User<id>").
func FirstName(name string) MessageOption { return func(m *msgSpec) { m.firstName = name } }

// IsBot marks the sender as a bot.
func IsBot() MessageOption { return func(m *msgSpec) { m.isBot = true } }

// Thread puts the message in a forum topic (message_thread_id,
// is_topic_message).
func Thread(id int64) MessageOption { return func(m *msgSpec) { m.thread = id } }

// ReplyTo makes the message a reply to a message of the chat (one added
// or one the bot sent).
func ReplyTo(messageID int64) MessageOption { return func(m *msgSpec) { m.replyTo = messageID } }

// Caption makes the message a photo with the text as its caption.
func Caption() MessageOption { return func(m *msgSpec) { m.caption = true } }

// Sticker makes the message a sticker (the text is ignored).
func Sticker() MessageOption { return func(m *msgSpec) { m.sticker = true } }

// Photo makes the message a photo without caption (the text is ignored).
func Photo() MessageOption { return func(m *msgSpec) { m.photo = true } }

// Service makes the message a service message (new_chat_members).
func Service() MessageOption { return func(m *msgSpec) { m.service = true } }

// Edited delivers the message as an edited_message update.
func Edited() MessageOption { return func(m *msgSpec) { m.edited = true } }

// ChannelPost delivers the message as a channel_post update (no sender).
func ChannelPost() MessageOption { return func(m *msgSpec) { m.channelPost = true } }

// TextMention adds a text_mention entity of userID over the UTF-16 range.
func TextMention(userID int64, offset, length int) MessageOption {
	return func(m *msgSpec) { m.textMention = &[3]int64{userID, int64(offset), int64(length)} }
}

var mentionRe = regexp.MustCompile(`@[A-Za-z0-9_]{3,32}`)

// entities finds @mentions as Telegram does, with UTF-16 offsets.
func entities(text string) []map[string]any {
	var out []map[string]any
	for _, loc := range mentionRe.FindAllStringIndex(text, -1) {
		off := len(utf16.Encode([]rune(text[:loc[0]])))
		n := len(utf16.Encode([]rune(text[loc[0]:loc[1]])))
		out = append(out, map[string]any{"type": "mention", "offset": off, "length": n})
	}
	return out
}

// AddMessage adds an incoming message (an update) from user fromID in
// chat chatID of type chatType (private, group, supergroup, channel) and
// returns its update_id. Mentions (@name) in the text get entities.
func (b *Bot) AddMessage(chatID int64, chatType string, fromID int64, text string, opts ...MessageOption) int64 {
	var spec msgSpec
	for _, o := range opts {
		o(&spec)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.chatLocked(chatID, chatType)
	c.nextMsg++
	msgID := c.nextMsg
	msg := map[string]any{"message_id": msgID, "date": time.Now().Unix(), "chat": chatJSON(chatID, chatType)}
	if !spec.channelPost {
		first := spec.firstName
		if first == "" {
			first = fmt.Sprintf("User%d", fromID)
		}
		from := map[string]any{"id": fromID, "is_bot": spec.isBot, "first_name": first}
		if spec.username != "" {
			from["username"] = spec.username
		}
		msg["from"] = from
	} else {
		msg["sender_chat"] = chatJSON(chatID, chatType)
	}
	if spec.thread != 0 {
		msg["message_thread_id"] = spec.thread
		msg["is_topic_message"] = true
	}
	if spec.replyTo != 0 {
		if orig, ok := c.msgs[spec.replyTo]; ok {
			msg["reply_to_message"] = orig
		}
	}
	ents := entities(text)
	if spec.textMention != nil {
		ents = append(ents, map[string]any{"type": "text_mention", "offset": spec.textMention[1], "length": spec.textMention[2],
			"user": map[string]any{"id": spec.textMention[0], "is_bot": spec.textMention[0] == b.id, "first_name": "Mentioned"}})
	}
	photo := []map[string]any{{"file_id": "AgAD-photo", "file_unique_id": "p1", "width": 90, "height": 90}}
	switch {
	case spec.sticker:
		msg["sticker"] = map[string]any{"file_id": "CAAD-sticker", "file_unique_id": "s1", "type": "regular", "width": 512, "height": 512, "is_animated": false, "is_video": false}
	case spec.photo:
		msg["photo"] = photo
	case spec.service:
		msg["new_chat_members"] = []map[string]any{{"id": fromID + 1, "is_bot": false, "first_name": "Newcomer"}}
	case spec.caption:
		msg["photo"] = photo
		msg["caption"] = text
		if len(ents) > 0 {
			msg["caption_entities"] = ents
		}
	default:
		msg["text"] = text
		if len(ents) > 0 {
			msg["entities"] = ents
		}
	}
	kind := "message"
	switch {
	case spec.edited:
		kind = "edited_message"
		msg["edit_date"] = time.Now().Unix()
	case spec.channelPost:
		kind = "channel_post"
	}
	stored := make(map[string]any, len(msg))
	for k, v := range msg {
		if k != "reply_to_message" {
			stored[k] = v
		}
	}
	c.msgs[msgID] = stored
	id := b.nextUpdateID
	b.nextUpdateID++
	b.updates = append(b.updates, &update{id: id, kind: kind, body: map[string]any{"update_id": id, kind: msg}})
	b.wakeLocked()
	return id
}

func chatJSON(id int64, typ string) map[string]any {
	c := map[string]any{"id": id, "type": typ}
	if typ == "private" {
		c["first_name"] = fmt.Sprintf("User%d", id)
	} else {
		c["title"] = fmt.Sprintf("Chat %d", id)
	}
	return c
}

func (b *Bot) chatLocked(id int64, typ string) *chat {
	c := b.chats[id]
	if c == nil {
		c = &chat{typ: typ, msgs: map[int64]map[string]any{}}
		b.chats[id] = c
	}
	return c
}

// DeleteMessage forgets a message of a chat (as if a user deleted it).
func (b *Bot) DeleteMessage(chatID, messageID int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.chats[chatID]; c != nil {
		delete(c.msgs, messageID)
	}
}

// Block makes sendMessage to the chat answer 403 (the user blocked the bot).
func (b *Bot) Block(chatID int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.chatLocked(chatID, "private").blocked = true
}

func retrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// FailSends makes the next n sendMessage calls answer 429 with
// parameters.retry_after (whole seconds, at least 1).
func (b *Bot) FailSends(n int, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failSends, b.failSendsRetry = n, retrySeconds(retryAfter)
}

// FailGetUpdates makes the next n getUpdates calls answer 429.
func (b *Bot) FailGetUpdates(n int, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failGets, b.failGetsRetry = n, retrySeconds(retryAfter)
}

// ConfirmedOffset is the highest offset a getUpdates call confirmed
// (every update below it is gone).
func (b *Bot) ConfirmedOffset() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.confirmed
}

// Pending is the number of updates not yet confirmed (or delivered).
func (b *Bot) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.updates)
}

// Calls is how often a method was called.
func (b *Bot) Calls(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[method]
}

// SentMessage is a message the bot sent.
type SentMessage struct {
	ChatID    int64
	MessageID int64
	Text      string
	// ReplyTo is the message replied to (0: none, or the original was
	// gone and allow_sending_without_reply was set).
	ReplyTo           int64
	AllowWithoutReply bool
	ThreadID          int64
	At                time.Time
}

// Sent lists the messages the bot sent, in order.
func (b *Bot) Sent() []SentMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]SentMessage(nil), b.sent...)
}

// SentTo lists the messages sent to one chat, in order.
func (b *Bot) SentTo(chatID int64) []SentMessage {
	var out []SentMessage
	for _, m := range b.Sent() {
		if m.ChatID == chatID {
			out = append(out, m)
		}
	}
	return out
}

// WebhookState is the webhook as set, with delivery counts.
type WebhookState struct {
	URL, SecretToken string
	AllowedUpdates   []string
	// Delivered counts 2xx-answered deliveries, Failed the others.
	Delivered, Failed int
	LastError         string
}

// Webhook returns the webhook state.
func (b *Bot) Webhook() WebhookState {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.hook
	return WebhookState{URL: h.url, SecretToken: h.secret, AllowedUpdates: append([]string(nil), h.allowed...),
		Delivered: h.delivered, Failed: h.failed, LastError: h.lastError}
}

func (b *Bot) getUpdates(ctx context.Context, p params) (any, *apiError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failGets > 0 {
		b.failGets--
		return nil, &apiError{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", b.failGetsRetry), retryAfter: b.failGetsRetry}
	}
	if b.hook.url != "" {
		return nil, &apiError{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	}
	// An offset confirms every update below it: they are gone for good.
	if off, ok := p.int("offset"); ok && off > 0 {
		i := 0
		for i < len(b.updates) && b.updates[i].id < off {
			i++
		}
		b.updates = b.updates[i:]
		b.confirmed = max(b.confirmed, off)
	}
	if allowed := p.strings("allowed_updates"); len(allowed) > 0 {
		kept := b.updates[:0]
		for _, u := range b.updates {
			if contains(allowed, u.kind) {
				kept = append(kept, u)
			}
		}
		b.updates = kept
	}
	limit, ok := p.int("limit")
	if !ok || limit < 1 || limit > 100 {
		limit = 100
	}
	timeout, _ := p.int("timeout")
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	for {
		if b.hook.url != "" {
			return nil, &apiError{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
		}
		if len(b.updates) > 0 || !time.Now().Before(deadline) {
			out := []map[string]any{}
			for _, u := range b.updates[:min(len(b.updates), int(limit))] {
				out = append(out, u.body)
			}
			return out, nil
		}
		wake := b.wake
		b.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		case <-b.srv.ctx.Done():
		}
		t.Stop()
		b.mu.Lock()
		if ctx.Err() != nil || b.srv.ctx.Err() != nil {
			return []map[string]any{}, nil
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

var secretRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

func (b *Bot) setWebhook(p params) (any, *apiError) {
	raw := p.str("url")
	if raw == "" {
		return b.deleteWebhook(p)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, &apiError{code: 400, desc: "Bad Request: bad webhook: invalid URL"}
	}
	secret := p.str("secret_token")
	if secret != "" && !secretRe.MatchString(secret) {
		return nil, &apiError{code: 400, desc: "Bad Request: secret token contains unallowed characters"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.bool("drop_pending_updates") {
		b.updates = nil
	}
	b.hook.url, b.hook.secret, b.hook.allowed = raw, secret, p.strings("allowed_updates")
	b.hook.gen++
	gen := b.hook.gen
	b.wakeLocked()
	b.srv.wg.Add(1)
	go b.deliver(gen)
	return true, nil
}

func (b *Bot) deleteWebhook(p params) (any, *apiError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.bool("drop_pending_updates") {
		b.updates = nil
	}
	b.hook.url, b.hook.secret, b.hook.allowed = "", "", nil
	b.hook.gen++
	b.wakeLocked()
	return true, nil
}

func (b *Bot) webhookInfo() any {
	b.mu.Lock()
	defer b.mu.Unlock()
	info := map[string]any{"url": b.hook.url, "has_custom_certificate": false, "pending_update_count": len(b.updates)}
	if b.hook.lastError != "" {
		info["last_error_message"] = b.hook.lastError
	}
	if len(b.hook.allowed) > 0 {
		info["allowed_updates"] = b.hook.allowed
	}
	return info
}

// deliver POSTs pending updates, oldest first, to the webhook until it
// answers 2xx, as Telegram does, while the webhook of generation gen is
// set.
func (b *Bot) deliver(gen int) {
	defer b.srv.wg.Done()
	ctx := b.srv.ctx
	for {
		b.mu.Lock()
		if b.hook.gen != gen || ctx.Err() != nil {
			b.mu.Unlock()
			return
		}
		if len(b.updates) > 0 && len(b.hook.allowed) > 0 && !contains(b.hook.allowed, b.updates[0].kind) {
			b.updates = b.updates[1:]
			b.mu.Unlock()
			continue
		}
		if len(b.updates) == 0 {
			wake := b.wake
			b.mu.Unlock()
			select {
			case <-wake:
			case <-ctx.Done():
			}
			continue
		}
		u, target, secret := b.updates[0], b.hook.url, b.hook.secret
		body, _ := json.Marshal(u.body)
		b.mu.Unlock()

		status, err := b.post(ctx, target, secret, body)
		b.mu.Lock()
		ok := err == nil && status/100 == 2
		if ok {
			b.hook.delivered++
			if len(b.updates) > 0 && b.updates[0] == u {
				b.updates = b.updates[1:]
			}
		} else {
			b.hook.failed++
			if err != nil {
				b.hook.lastError = err.Error()
			} else {
				b.hook.lastError = fmt.Sprintf("Wrong response from the webhook: %d", status)
			}
		}
		b.mu.Unlock()
		if !ok {
			select {
			case <-time.After(RedeliveryDelay):
			case <-ctx.Done():
			}
		}
	}
}

func (b *Bot) post(ctx context.Context, target, secret string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	resp, err := b.srv.client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (b *Bot) sendMessage(p params) (any, *apiError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failSends > 0 {
		b.failSends--
		return nil, &apiError{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", b.failSendsRetry), retryAfter: b.failSendsRetry}
	}
	chatID, ok := p.int("chat_id")
	if !ok {
		if p.str("chat_id") == "" {
			return nil, &apiError{code: 400, desc: "Bad Request: chat_id is empty"}
		}
		return nil, &apiError{code: 400, desc: "Bad Request: chat not found"}
	}
	c := b.chats[chatID]
	if c == nil {
		return nil, &apiError{code: 400, desc: "Bad Request: chat not found"}
	}
	if c.blocked {
		return nil, &apiError{code: 403, desc: "Forbidden: bot was blocked by the user"}
	}
	text := p.str("text")
	if strings.TrimSpace(text) == "" {
		return nil, &apiError{code: 400, desc: "Bad Request: message text is empty"}
	}
	if len(utf16.Encode([]rune(text))) > 4096 {
		return nil, &apiError{code: 400, desc: "Bad Request: message is too long"}
	}
	thread, _ := p.int("message_thread_id")
	var rp struct {
		MessageID int64 `json:"message_id"`
		Allow     bool  `json:"allow_sending_without_reply"`
	}
	p.object("reply_parameters", &rp)
	if rp.MessageID == 0 {
		rp.MessageID, _ = p.int("reply_to_message_id")
		rp.Allow = p.bool("allow_sending_without_reply")
	}
	msgID := c.nextMsg + 1
	msg := map[string]any{"message_id": msgID, "date": time.Now().Unix(), "chat": chatJSON(chatID, c.typ),
		"from": map[string]any{"id": b.id, "is_bot": true, "first_name": "Agentry Test", "username": b.username}, "text": text}
	replyTo := rp.MessageID
	if replyTo != 0 {
		orig, ok := c.msgs[replyTo]
		switch {
		case ok:
			msg["reply_to_message"] = orig
		case rp.Allow:
			replyTo = 0
		default:
			return nil, &apiError{code: 400, desc: "Bad Request: message to be replied not found"}
		}
	}
	if thread != 0 {
		msg["message_thread_id"] = thread
		msg["is_topic_message"] = true
	}
	c.nextMsg = msgID
	stored := make(map[string]any, len(msg))
	for k, v := range msg {
		if k != "reply_to_message" {
			stored[k] = v
		}
	}
	c.msgs[msgID] = stored
	b.sent = append(b.sent, SentMessage{ChatID: chatID, MessageID: msgID, Text: text, ReplyTo: replyTo,
		AllowWithoutReply: rp.Allow, ThreadID: thread, At: time.Now()})
	return msg, nil
}
