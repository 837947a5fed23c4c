// Package fakediscord is a fake Discord on 127.0.0.1 for tests: real
// HTTP and a real gateway WebSocket speaking Discord's wire protocol
// (HELLO, IDENTIFY, READY, heartbeats, dispatches with sequence numbers,
// RESUME with replay) and the REST routes a bot uses, so the real
// discordgo library can be driven against it. Tests post messages as
// users, drop connections, make sends fail with 429 and read what the
// bot sent.
//
// REST answers under /api/v9 (what discordgo v0.29 uses) and /api/v10.
// Safe for concurrent use.
package fakediscord

import (
	"encoding/json"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// discordEpoch is the snowflake epoch (2015-01-01T00:00:00Z) in ms.
const discordEpoch = 1420070400000

// Message is a stored channel message (the fields Discord sends that a
// bot reads).
type Message struct {
	ID        string
	ChannelID string
	GuildID   string
	AuthorID  string
	Username  string
	AuthorBot bool
	Content   string
	Mentions  []string
	// Attachments is the number of files (a message with files and no
	// text has Content "").
	Attachments int
	Timestamp   time.Time
}

// SentMessage is a message the bot posted through REST.
type SentMessage struct {
	ID        string
	ChannelID string
	Content   string
	// ReplyTo is message_reference.message_id ("" when none).
	ReplyTo string
	// FailIfNotExists is message_reference.fail_if_not_exists (nil when
	// absent).
	FailIfNotExists *bool
	// At is when the fake accepted it.
	At time.Time
}

// PostOption changes a message posted with Post or PostOffline.
type PostOption func(*Message)

// AsBot marks the author as a bot account.
func AsBot() PostOption { return func(m *Message) { m.AuthorBot = true } }

// MentionBot mentions the bot: "<@BOTID> " is put before the content
// and the bot is listed in mentions.
func MentionBot() PostOption { return func(m *Message) { m.Mentions = append(m.Mentions, "\x00bot") } }

// NoContent makes an attachment-only message (content "").
func NoContent() PostOption {
	return func(m *Message) { m.Content, m.Attachments = "", 1 }
}

// Username sets the author's user name (default "user-<id>").
func Username(name string) PostOption { return func(m *Message) { m.Username = name } }

// Server is the fake. Start one with Start.
type Server struct {
	token   string
	botID   string
	botName string
	ln      net.Listener
	srv     *http.Server
	// HeartbeatInterval is sent in HELLO (ms).
	heartbeatMS int

	mu         sync.Mutex
	lastID     uint64
	channels   map[string]string // channel id -> guild id ("" for DMs)
	messages   map[string][]*Message
	sent       []SentMessage
	failSends  int
	retryAfter time.Duration
	global     bool
	sessions   map[string]*session
	conns      map[*gwConn]bool
	identifies int
	resumes    int
	heartbeats int
	intents    int
	closed     bool
}

// Start serves a fake Discord whose valid bot token is token (with or
// without the "Bot " prefix) and whose bot user id is botUserID.
func Start(token, botUserID string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		token: strings.TrimPrefix(token, "Bot "), botID: botUserID, botName: "agentry-bot",
		ln: ln, heartbeatMS: 1000,
		channels: map[string]string{}, messages: map[string][]*Message{},
		sessions: map[string]*session{}, conns: map[*gwConn]bool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.rest)
	mux.HandleFunc("/ws", s.gateway)
	mux.HandleFunc("/ws/", s.gateway)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// APIBase is the root that replaces https://discord.com (what a
// channel's api_base_url is set to).
func (s *Server) APIBase() string { return "http://" + s.ln.Addr().String() }

// GatewayURL is the WebSocket URL GET /gateway answers.
func (s *Server) GatewayURL() string { return "ws://" + s.ln.Addr().String() + "/ws" }

// BotName is the bot user's user name.
func (s *Server) BotName() string { return s.botName }

// Close stops the server and closes every gateway connection.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.ws.UnderlyingConn().Close()
	}
	s.mu.Unlock()
	_ = s.srv.Close()
}

// nextID returns a new snowflake, larger than every earlier one. Caller
// holds mu.
func (s *Server) nextID() string {
	id := uint64(time.Now().UnixMilli()-discordEpoch) << 22
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatUint(id, 10)
}

// SetToken replaces the valid bot token (a token revoked in the
// developer portal): REST answers 401 and the gateway closes with 4004
// for the old one.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = strings.TrimPrefix(token, "Bot ")
}

// AddChannel makes a channel known (guildID "" for a direct message
// channel). Post does it too.
func (s *Server) AddChannel(channelID, guildID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[channelID] = guildID
}

// Post stores a message from authorID in the channel and dispatches
// MESSAGE_CREATE to every gateway session (connected ones now, dropped
// ones on resume). It returns the message id.
func (s *Server) Post(channelID, guildID, authorID, content string, opts ...PostOption) string {
	return s.post(true, channelID, guildID, authorID, content, opts)
}

// PostOffline stores a message without dispatching it: a message the
// gateway missed, found only through GET /channels/{id}/messages.
func (s *Server) PostOffline(channelID, guildID, authorID, content string, opts ...PostOption) string {
	return s.post(false, channelID, guildID, authorID, content, opts)
}

func (s *Server) post(dispatch bool, channelID, guildID, authorID, content string, opts []PostOption) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{ChannelID: channelID, GuildID: guildID, AuthorID: authorID, Content: content,
		Username: "user-" + authorID}
	for _, o := range opts {
		o(m)
	}
	for i, id := range m.Mentions {
		if id == "\x00bot" {
			m.Mentions[i] = s.botID
			m.Content = "<@" + s.botID + "> " + m.Content
		}
	}
	m.ID, m.Timestamp = s.nextID(), time.Now().UTC().Truncate(time.Millisecond)
	s.channels[channelID] = guildID
	s.messages[channelID] = append(s.messages[channelID], m)
	if dispatch {
		s.dispatchAll("MESSAGE_CREATE", s.messageJSON(m, true))
	}
	return m.ID
}

// Edit changes a stored message's content and dispatches MESSAGE_UPDATE.
func (s *Server) Edit(channelID, messageID, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.messages[channelID] {
		if m.ID == messageID {
			m.Content = content
			j := s.messageJSON(m, true)
			j["edited_timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
			s.dispatchAll("MESSAGE_UPDATE", j)
		}
	}
}

// Delete removes a stored message and dispatches MESSAGE_DELETE.
func (s *Server) Delete(channelID, messageID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.messages[channelID]
	for i, m := range ms {
		if m.ID == messageID {
			s.messages[channelID] = append(ms[:i:i], ms[i+1:]...)
			d := map[string]any{"id": m.ID, "channel_id": channelID}
			if m.GuildID != "" {
				d["guild_id"] = m.GuildID
			}
			s.dispatchAll("MESSAGE_DELETE", d)
			return
		}
	}
}

// Sent returns the messages the bot posted, in order.
func (s *Server) Sent() []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SentMessage(nil), s.sent...)
}

// FailSends makes the next n message posts answer 429 with retryAfter.
func (s *Server) FailSends(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSends, s.retryAfter, s.global = n, retryAfter, false
}

// FailSendsGlobal is FailSends with Discord's global rate limit (the
// whole bot is limited: "global": true, X-RateLimit-Global).
func (s *Server) FailSendsGlobal(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSends, s.retryAfter, s.global = n, retryAfter, true
}

// Identifies counts IDENTIFY payloads with a valid token (new sessions).
func (s *Server) Identifies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identifies
}

// Resumes counts successful RESUMEs.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// Heartbeats counts heartbeats acknowledged.
func (s *Server) Heartbeats() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heartbeats
}

// Intents are the gateway intents of the last IDENTIFY.
func (s *Server) Intents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.intents
}

// messageJSON renders a message as Discord's message object. Caller
// holds mu. Gateway events carry guild_id; REST messages do not.
func (s *Server) messageJSON(m *Message, withGuild bool) map[string]any {
	mentions := []map[string]any{}
	for _, id := range m.Mentions {
		mentions = append(mentions, map[string]any{"id": id, "username": "user-" + id, "bot": id == s.botID})
	}
	atts := []map[string]any{}
	for i := 0; i < m.Attachments; i++ {
		atts = append(atts, map[string]any{"id": m.ID + strconv.Itoa(i), "filename": "photo.png", "size": 1})
	}
	j := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "type": 0,
		"timestamp": m.Timestamp.Format(time.RFC3339Nano), "edited_timestamp": nil,
		"author":   map[string]any{"id": m.AuthorID, "username": m.Username, "discriminator": "0", "bot": m.AuthorBot},
		"mentions": mentions, "attachments": atts, "embeds": []any{}, "tts": false, "mention_everyone": false,
	}
	if withGuild && m.GuildID != "" {
		j["guild_id"] = m.GuildID
	}
	return j
}

// rest serves /api/v9 and /api/v10.
func (s *Server) rest(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case strings.HasPrefix(path, "/api/v9/"):
		path = strings.TrimPrefix(path, "/api/v9")
	case strings.HasPrefix(path, "/api/v10/"):
		path = strings.TrimPrefix(path, "/api/v10")
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
		return
	}
	if path == "/gateway" && r.Method == http.MethodGet { // no auth needed
		writeJSON(w, 200, map[string]any{"url": s.GatewayURL()})
		return
	}
	if !s.validToken(r.Header.Get("Authorization")) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/gateway/bot" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"url": s.GatewayURL(), "shards": 1,
			"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}})
	case path == "/users/@me" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"id": s.botID, "username": s.botName, "discriminator": "0", "bot": true})
	case len(parts) == 2 && parts[0] == "channels" && r.Method == http.MethodGet:
		s.getChannel(w, parts[1])
	case len(parts) == 3 && parts[0] == "channels" && parts[2] == "messages" && r.Method == http.MethodGet:
		s.listMessages(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "channels" && parts[2] == "messages" && r.Method == http.MethodPost:
		s.createMessage(w, r, parts[1])
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
	}
}

func (s *Server) getChannel(w http.ResponseWriter, id string) {
	s.mu.Lock()
	guild, ok := s.channels[id]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Channel", "code": 10003})
		return
	}
	j := map[string]any{"id": id, "type": 1}
	if guild != "" {
		j["type"], j["guild_id"], j["name"] = 0, guild, "general"
	}
	writeJSON(w, 200, j)
}

// listMessages answers like Discord: with after, the oldest `limit`
// messages after it; without, the newest; either way newest first.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, channel string) {
	limit := 50
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
		limit = n
	}
	after := uint64(0)
	hasAfter := r.URL.Query().Get("after") != ""
	if hasAfter {
		a, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
		after = a
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[channel]; !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Channel", "code": 10003})
		return
	}
	var sel []*Message
	for _, m := range s.messages[channel] {
		if id, _ := strconv.ParseUint(m.ID, 10, 64); id > after {
			sel = append(sel, m)
		}
	}
	sort.Slice(sel, func(i, j int) bool { return snowLess(sel[i].ID, sel[j].ID) })
	if len(sel) > limit {
		if hasAfter {
			sel = sel[:limit]
		} else {
			sel = sel[len(sel)-limit:]
		}
	}
	out := make([]map[string]any, 0, len(sel))
	for i := len(sel) - 1; i >= 0; i-- {
		out = append(out, s.messageJSON(sel[i], false))
	}
	writeJSON(w, 200, out)
}

func (s *Server) createMessage(w http.ResponseWriter, r *http.Request, channel string) {
	var body struct {
		Content string `json:"content"`
		Ref     *struct {
			MessageID       string `json:"message_id"`
			FailIfNotExists *bool  `json:"fail_if_not_exists"`
		} `json:"message_reference"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failSends > 0 {
		s.failSends--
		secs := s.retryAfter.Seconds()
		h := w.Header()
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(secs))))
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
		h.Set("X-RateLimit-Bucket", "fake-messages")
		h.Set("X-RateLimit-Scope", "user")
		if s.global {
			h.Set("X-RateLimit-Global", "true")
			h.Set("X-RateLimit-Scope", "global")
		}
		writeJSON(w, http.StatusTooManyRequests, map[string]any{
			"message": "You are being rate limited.", "retry_after": secs, "global": s.global})
		return
	}
	guild, ok := s.channels[channel]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Channel", "code": 10003})
		return
	}
	if body.Content == "" || len([]rune(body.Content)) > 2000 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
		return
	}
	m := &Message{ID: s.nextID(), ChannelID: channel, GuildID: guild, AuthorID: s.botID, Username: s.botName,
		AuthorBot: true, Content: body.Content, Timestamp: time.Now().UTC().Truncate(time.Millisecond)}
	sm := SentMessage{ID: m.ID, ChannelID: channel, Content: body.Content, At: time.Now()}
	if body.Ref != nil {
		sm.ReplyTo, sm.FailIfNotExists = body.Ref.MessageID, body.Ref.FailIfNotExists
	}
	s.sent = append(s.sent, sm)
	s.messages[channel] = append(s.messages[channel], m)
	// Discord echoes the bot's own message on the gateway.
	s.dispatchAll("MESSAGE_CREATE", s.messageJSON(m, true))
	writeJSON(w, 200, s.messageJSON(m, false))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// snowLess orders snowflakes numerically.
func snowLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}
