package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/agentryhq/agentry/internal/channels"
)

// Gateway close codes the receiver acts on.
const (
	closeAuthenticationFailed = 4004 // token refused: stop
	closeInvalidSeq           = 4007 // resume impossible: new session
	closeSessionTimedOut      = 4009 // resume impossible: new session
	closeDisallowedIntents    = 4014 // Message Content intent not enabled
)

// pageSize is the most messages Discord returns per history request.
const pageSize = 100

// intents are what the bot listens to: guild and direct messages with
// their text (Message Content is a privileged intent, enabled in the
// developer portal).
const intents = discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// receiver is one Receive call: the connection loop (main goroutine) and
// the worker that hands events to the sink one at a time, in order.
type receiver struct {
	a      *Adapter
	q      queue
	drop   chan struct{} // the gateway connection was lost
	fatal  chan error    // the worker met refused credentials
	prefix string

	// Owned by the worker goroutine.
	botID   string
	cursors map[string]uint64 // chat -> last handed message id
	guilds  map[string]string // chat -> guild id ("" for DMs), when known
}

// Receive runs the gateway until ctx ends (it then returns nil) or the
// token is refused (*channels.Unauthorized).
func (a *Adapter) Receive(ctx context.Context) error {
	if a.deps.Sink == nil {
		return errors.New("discord: Receive needs a sink")
	}
	r := &receiver{
		a: a, drop: make(chan struct{}, 1), fatal: make(chan error, 1),
		prefix:  "discord/" + a.deps.Settings.ID + "/chat/",
		cursors: map[string]uint64{}, guilds: map[string]string{},
	}
	r.q.wake = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.work(ctx)
	}()
	err := r.connect(ctx)
	cancel()
	wg.Wait()
	st := a.deps.Status
	if err != nil {
		st.SetState(channels.StateUnauthorized)
		st.SetError(err)
		a.deps.Logf("discord %s: the token was refused; receiving stopped", a.deps.Settings.ID)
		return err
	}
	st.SetState(channels.StateStopped)
	return nil
}

// connect keeps one gateway session open: discordgo heartbeats; after a
// lost connection Open resumes (session id and sequence are kept and
// Discord replays what was missed); when a resume is impossible a fresh
// session identifies again (and its READY triggers a catch-up).
func (r *receiver) connect(ctx context.Context) error {
	a, st := r.a, r.a.deps.Status
	var s *discordgo.Session
	b := backoff{}
	for ctx.Err() == nil {
		st.SetState(channels.StateConnecting)
		if s == nil {
			var err error
			if s, err = r.newSession(ctx); err != nil {
				var un *channels.Unauthorized
				if errors.As(err, &un) {
					return un
				}
				st.SetError(err)
				a.deps.Logf("discord %s: %v", a.deps.Settings.ID, err)
				s = nil
				b.wait(ctx)
				continue
			}
		}
		err := s.Open()
		if err != nil && !errors.Is(err, discordgo.ErrWSAlreadyOpen) {
			var ce *websocket.CloseError
			var re *discordgo.RESTError
			switch {
			case errors.As(err, &ce) && ce.Code == closeAuthenticationFailed:
				return &channels.Unauthorized{Msg: "gateway closed with 4004 (authentication failed)"}
			case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized:
				return &channels.Unauthorized{Msg: "401 from GET /gateway"}
			case errors.As(err, &ce) && (ce.Code == closeInvalidSeq || ce.Code == closeSessionTimedOut):
				s = nil // identify anew
			case errors.As(err, &ce) && ce.Code == closeDisallowedIntents:
				err = errors.New("gateway closed with 4014: enable the Message Content intent for the bot in the Discord developer portal")
			}
			st.SetError(err)
			a.deps.Logf("discord %s: gateway: %v", a.deps.Settings.ID, err)
			b.wait(ctx)
			continue
		}
		st.SetState(channels.StateConnected)
		b.reset()
		select {
		case <-ctx.Done():
			_ = s.Close() // close 1000: Discord ends the session
			return nil
		case err := <-r.fatal:
			_ = s.Close()
			return err
		case <-r.drop:
			a.deps.Logf("discord %s: gateway connection lost; resuming", a.deps.Settings.ID)
		}
	}
	if s != nil {
		_ = s.Close()
	}
	return nil
}

// newSession builds a gateway session and checks the token (GET
// /users/@me): a refused token stops the receiver before connecting.
func (r *receiver) newSession(ctx context.Context) (*discordgo.Session, error) {
	rec := &recorder{}
	s, err := r.a.session(rec)
	if err != nil {
		return nil, err
	}
	me, err := s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return nil, mapError(err, rec)
	}
	r.a.deps.Status.SetDetail("bot_user", me.Username)
	s.Identify.Intents = intents
	s.ShouldReconnectOnError = false // connect() reconnects, so it sees close codes
	s.SyncEvents = true              // handlers run in order on the reader goroutine
	s.Dialer = &websocket.Dialer{HandshakeTimeout: 30 * time.Second, Proxy: http.ProxyFromEnvironment}
	s.AddHandler(func(_ *discordgo.Session, e *discordgo.Ready) { r.q.push(item{ready: e, sess: s}) })
	s.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageCreate) { r.q.push(item{msg: e.Message, sess: s}) })
	s.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageUpdate) { r.ignore("edited message", e.ID) })
	s.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageDelete) { r.ignore("deleted message", e.ID) })
	s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
		select {
		case r.drop <- struct{}{}:
		default:
		}
	})
	return s, nil
}

func (r *receiver) ignore(why, id string) {
	r.a.deps.Status.Ignored()
	r.a.deps.Logf("discord %s: ignored %s %s", r.a.deps.Settings.ID, why, id)
}

// work hands queued events to the sink one at a time.
func (r *receiver) work(ctx context.Context) {
	for {
		it, ok := r.q.pop(ctx)
		if !ok {
			return
		}
		switch {
		case it.ready != nil:
			if it.ready.User != nil {
				r.botID = it.ready.User.ID
			}
			r.catchUp(ctx, it.sess)
		case it.msg != nil:
			if it.msg.GuildID != "" || r.guilds[it.msg.ChannelID] == "" {
				r.guilds[it.msg.ChannelID] = it.msg.GuildID
			}
			r.deliver(ctx, it.msg)
		}
	}
}

// catchUp fetches, for every chat with a stored position, the messages
// after it (a new gateway session does not replay what happened while
// the bot was away) and hands them over oldest first. Live events wait
// in the queue meanwhile, so order per chat holds.
func (r *receiver) catchUp(ctx context.Context, s *discordgo.Session) {
	cur := r.a.deps.Cursors
	if cur == nil {
		return
	}
	var keys []string
	err := retry(ctx, 5, func() error {
		var err error
		keys, err = cur.CursorKeys(ctx, r.prefix)
		return err
	})
	if err != nil {
		r.fail(fmt.Errorf("catch-up: listing cursors: %w", err))
		return
	}
	sort.Strings(keys)
	for _, k := range keys {
		chat := strings.TrimPrefix(k, r.prefix)
		if chat == "" || strings.Contains(chat, "/") {
			continue
		}
		if err := r.catchUpChat(ctx, s, chat); err != nil {
			var un *channels.Unauthorized
			if errors.As(err, &un) {
				select {
				case r.fatal <- un:
				default:
				}
				return
			}
			if ctx.Err() != nil {
				return
			}
			r.fail(fmt.Errorf("catch-up of chat %s: %w", chat, err))
		}
	}
}

func (r *receiver) catchUpChat(ctx context.Context, s *discordgo.Session, chat string) error {
	after, err := r.cursor(ctx, chat)
	if err != nil {
		return err
	}
	if after == 0 {
		return nil
	}
	if _, known := r.guilds[chat]; !known {
		var ch *discordgo.Channel
		if err := r.rest(ctx, func(rec *recorder) error {
			var err error
			ch, err = s.Channel(chat, discordgo.WithContext(ctx), withRecorder(s, rec))
			return err
		}); err != nil {
			return err
		}
		r.guilds[chat] = ch.GuildID
	}
	for {
		var page []*discordgo.Message
		if err := r.rest(ctx, func(rec *recorder) error {
			var err error
			page, err = s.ChannelMessages(chat, pageSize, "", strconv.FormatUint(after, 10), "",
				discordgo.WithContext(ctx), withRecorder(s, rec))
			return err
		}); err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		// Discord answers newest first; hand them oldest first.
		sort.Slice(page, func(i, j int) bool { return snowflake(page[i].ID) < snowflake(page[j].ID) })
		for _, m := range page {
			if m.GuildID == "" {
				m.GuildID = r.guilds[chat]
			}
			if m.ChannelID == "" {
				m.ChannelID = chat
			}
			r.deliver(ctx, m)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		last := snowflake(page[len(page)-1].ID)
		if len(page) < pageSize || last <= after {
			return nil
		}
		after = last
	}
}

// rest runs one REST call, waiting out 429s (as long as Discord asks)
// and retrying other transient failures a few times. Refused and
// unauthorized answers return at once.
func (r *receiver) rest(ctx context.Context, call func(*recorder) error) error {
	b := backoff{}
	for attempt := 0; ; attempt++ {
		rec := &recorder{}
		err := call(rec)
		if err == nil {
			return nil
		}
		err = mapError(err, rec)
		var rl *channels.RateLimited
		var ref *channels.Refused
		var un *channels.Unauthorized
		switch {
		case errors.As(err, &rl):
			if !sleep(ctx, rl.RetryAfter) {
				return ctx.Err()
			}
			continue
		case errors.As(err, &ref), errors.As(err, &un), ctx.Err() != nil:
			return err
		case attempt >= 4:
			return err
		}
		b.wait(ctx)
	}
}

// withRecorder routes one call through a client that records its error
// response (for the 429's Retry-After) on the session's transport.
func withRecorder(s *discordgo.Session, rec *recorder) discordgo.RequestOption {
	c := *s.Client
	if t, ok := c.Transport.(*rewriter); ok {
		t2 := *t
		t2.rec = rec
		c.Transport = &t2
	}
	return discordgo.WithClient(&c)
}

// deliver maps a message and hands it to the sink, retrying until the
// sink takes it (or ctx ends): a message is never skipped, so the
// stored position never passes one that was not handed over.
func (r *receiver) deliver(ctx context.Context, m *discordgo.Message) {
	a := r.a
	chat := m.ChannelID
	last, err := r.cursor(ctx, chat)
	if err != nil {
		a.deps.Logf("discord %s: reading the position of chat %s: %v", a.deps.Settings.ID, chat, err)
	}
	id := snowflake(m.ID)
	if id != 0 && id <= last {
		return // handed over before (catch-up and live events overlap)
	}
	in, why := toInbound(m, r.botID)
	if why != "" {
		r.ignore(why, m.ID)
	} else {
		b := backoff{}
		for {
			err := a.deps.Sink(ctx, in)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			a.deps.Status.SetError(fmt.Errorf("handing message %s over: %w", m.ID, err))
			a.deps.Logf("discord %s: handing message %s of chat %s over failed, retrying: %v", a.deps.Settings.ID, m.ID, chat, err)
			b.wait(ctx)
		}
		a.deps.Status.Received()
	}
	r.advance(ctx, chat, id)
}

// cursor returns the stored position of a chat (0 when none).
func (r *receiver) cursor(ctx context.Context, chat string) (uint64, error) {
	if v, ok := r.cursors[chat]; ok {
		return v, nil
	}
	if r.a.deps.Cursors == nil {
		return 0, nil
	}
	s, err := r.a.deps.Cursors.Cursor(ctx, r.prefix+chat)
	if err != nil {
		return 0, err
	}
	v := snowflake(s)
	r.cursors[chat] = v
	return v, nil
}

// advance stores a chat's position (message ids are snowflakes: they
// only grow).
func (r *receiver) advance(ctx context.Context, chat string, id uint64) {
	if id == 0 || id <= r.cursors[chat] {
		return
	}
	r.cursors[chat] = id
	if r.a.deps.Cursors == nil {
		return
	}
	if err := r.a.deps.Cursors.SetCursor(ctx, r.prefix+chat, strconv.FormatUint(id, 10)); err != nil && ctx.Err() == nil {
		r.fail(fmt.Errorf("storing the position of chat %s: %w", chat, err))
	}
}

func (r *receiver) fail(err error) {
	r.a.deps.Status.SetError(err)
	r.a.deps.Logf("discord %s: %v", r.a.deps.Settings.ID, err)
}

// toInbound maps a Discord message; why is non-empty when the message
// is not for the sink (no text: attachments, stickers, embeds; system
// messages such as joins and pins).
func toInbound(m *discordgo.Message, botID string) (in channels.Inbound, why string) {
	if m.Author == nil {
		return in, "message without author"
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return in, fmt.Sprintf("system message (type %d)", m.Type)
	}
	if strings.TrimSpace(m.Content) == "" {
		return in, "message without text"
	}
	in = channels.Inbound{
		MessageID: m.ID, ChatID: m.ChannelID, ChatType: channels.ChatGroup,
		UserID: m.Author.ID, Username: m.Author.Username,
		FromSelf: botID != "" && m.Author.ID == botID, FromBot: m.Author.Bot,
		ReplyTo: m.ID, At: m.Timestamp,
	}
	if m.GuildID == "" {
		in.ChatType = channels.ChatDirect
	}
	text := m.Content
	if botID != "" {
		for _, tag := range []string{"<@" + botID + ">", "<@!" + botID + ">"} {
			if strings.Contains(text, tag) {
				in.Mentioned = true
				text = strings.ReplaceAll(text, tag, "")
			}
		}
		for _, u := range m.Mentions {
			if u != nil && u.ID == botID {
				in.Mentioned = true
			}
		}
	}
	in.Text = strings.TrimSpace(text)
	return in, ""
}

func snowflake(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// item is one gateway event for the worker.
type item struct {
	ready *discordgo.Ready
	msg   *discordgo.Message
	sess  *discordgo.Session
}

// queue is an unbounded FIFO: the gateway reader never blocks on a slow
// sink (it must keep reading heartbeat acks).
type queue struct {
	mu    sync.Mutex
	items []item
	wake  chan struct{}
}

func (q *queue) push(it item) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) pop(ctx context.Context) (item, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			it := q.items[0]
			q.items[0] = item{}
			q.items = q.items[1:]
			q.mu.Unlock()
			return it, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return item{}, false
		case <-q.wake:
		}
	}
}

// backoff doubles from 250ms to 30s.
type backoff struct{ d time.Duration }

func (b *backoff) wait(ctx context.Context) {
	if b.d == 0 {
		b.d = 250 * time.Millisecond
	} else if b.d *= 2; b.d > 30*time.Second {
		b.d = 30 * time.Second
	}
	sleep(ctx, b.d)
}

func (b *backoff) reset() { b.d = 0 }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func retry(ctx context.Context, n int, f func() error) error {
	b := backoff{}
	var err error
	for i := 0; i < n; i++ {
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
		b.wait(ctx)
	}
	return err
}
