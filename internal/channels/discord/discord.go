// Package discord is the Discord channel adapter, on discordgo: messages
// arrive over the gateway WebSocket (identify, heartbeat and resume are
// the library's) and replies go out through REST. Discord has no
// acknowledgement, so the adapter keeps its own durable position (the
// last message id per chat in the channel's Cursors) and fetches what
// it missed from the REST history when it starts a new gateway session.
package discord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentryhq/agentry/internal/channels"
)

// discordRoot is where discordgo's endpoints point (package variables
// we must not change: several channels may use different roots).
const discordRoot = "https://discord.com/"

// Adapter is one Discord bot as a channel.
type Adapter struct {
	deps  channels.Deps
	token string
	// root replaces https://discord.com/ ("" keeps it).
	root *url.URL
	base http.RoundTripper
}

// New builds a Discord adapter (a channels.Factory).
func New(deps channels.Deps) (channels.Adapter, error) {
	token := strings.TrimSpace(deps.Settings.BotToken)
	if token == "" {
		return nil, errors.New("discord: bot_token is required")
	}
	if !strings.HasPrefix(token, "Bot ") {
		token = "Bot " + token
	}
	a := &Adapter{deps: deps, token: token, base: http.DefaultTransport}
	if deps.HTTP != nil && deps.HTTP.Transport != nil {
		a.base = deps.HTTP.Transport
	}
	if b := strings.TrimSpace(deps.Settings.APIBaseURL); b != "" {
		u, err := url.Parse(strings.TrimSuffix(b, "/") + "/")
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("discord: api_base_url %q is not an http(s) URL", b)
		}
		a.root = u
	}
	if a.deps.Status == nil {
		a.deps.Status = &channels.Status{}
	}
	if a.deps.Logf == nil {
		a.deps.Logf = func(string, ...any) {}
	}
	return a, nil
}

// Limits are Discord's: 2000 characters a message, about one message a
// second per channel, 50 requests a second per bot.
func (a *Adapter) Limits() channels.Limits {
	return channels.Limits{MaxText: 2000, PerChat: time.Second, PerBotPerSecond: 50}
}

// session builds a discordgo session whose REST calls go to the
// configured root through rec (which remembers the last error response:
// discordgo drops the 429 "global" flag and the headers). The library's
// own logging is off (its debug lines would carry the token); retries
// on a rate limit are off too, the caller decides how long to wait.
func (a *Adapter) session(rec *recorder) (*discordgo.Session, error) {
	s, err := discordgo.New(a.token)
	if err != nil {
		return nil, err
	}
	timeout := 30 * time.Second
	if a.deps.HTTP != nil && a.deps.HTTP.Timeout > 0 {
		timeout = a.deps.HTTP.Timeout
	}
	s.Client = &http.Client{Timeout: timeout, Transport: &rewriter{root: a.root, base: a.base, rec: rec}}
	s.LogLevel = -1 // below LogError: discordgo logs nothing
	s.Debug = false
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	s.StateEnabled = false
	s.Compress = false
	return s, nil
}

// Send posts one message; ReplyTo becomes a message reference that does
// not fail when the message is gone. Mentions in the text ping nobody
// but the replied-to user (an agent's reply must not @everyone). Every
// call uses a fresh rate limiter so discordgo never sleeps: pacing is the
// caller's, a 429 comes back as *channels.RateLimited.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (channels.Sent, error) {
	chat := m.ChatID
	if m.ThreadID != "" { // a Discord thread is a channel of its own
		chat = m.ThreadID
	}
	if chat == "" {
		return channels.Sent{}, &channels.Refused{Status: http.StatusBadRequest, Msg: "no chat id"}
	}
	rec := &recorder{}
	s, err := a.session(rec)
	if err != nil {
		return channels.Sent{}, err
	}
	send := &discordgo.MessageSend{
		Content:         m.Text,
		AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, RepliedUser: true},
	}
	if m.ReplyTo != "" {
		no := false
		send.Reference = &discordgo.MessageReference{MessageID: m.ReplyTo, ChannelID: chat, FailIfNotExists: &no}
	}
	msg, err := s.ChannelMessageSendComplex(chat, send, discordgo.WithContext(ctx))
	if err != nil {
		return channels.Sent{}, mapError(err, rec)
	}
	return channels.Sent{PlatformID: msg.ID}, nil
}

// mapError turns discordgo's REST errors into the channels errors.
func mapError(err error, rec *recorder) error {
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) || rec.status() == http.StatusTooManyRequests {
		return rec.rateLimited(rl)
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		msg := http.StatusText(re.Response.StatusCode)
		if re.Message != nil && re.Message.Message != "" {
			msg = re.Message.Message
		}
		switch code := re.Response.StatusCode; {
		case code == http.StatusUnauthorized:
			return &channels.Unauthorized{Msg: msg}
		case code == http.StatusForbidden, code == http.StatusNotFound, code == http.StatusBadRequest,
			code == http.StatusRequestEntityTooLarge:
			return &channels.Refused{Status: code, Msg: msg}
		}
		return fmt.Errorf("discord: %d %s", re.Response.StatusCode, msg)
	}
	if errors.Is(err, discordgo.ErrUnauthorized) {
		return &channels.Unauthorized{Msg: "401 Unauthorized"}
	}
	return fmt.Errorf("discord: %w", err)
}

// rewriter sends requests for https://discord.com/ to the configured
// root instead (api_base_url), leaving the request itself untouched.
type rewriter struct {
	root *url.URL
	base http.RoundTripper
	rec  *recorder
}

func (t *rewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.root != nil && r.URL.Scheme == "https" && r.URL.Host == "discord.com" {
		r = r.Clone(r.Context())
		u := *t.root
		u.Path = strings.TrimSuffix(t.root.Path, "/") + r.URL.Path
		u.RawPath = ""
		u.RawQuery = r.URL.RawQuery
		r.URL, r.Host = &u, u.Host
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && t.rec != nil && resp.StatusCode >= 400 {
		t.rec.keep(resp)
	}
	return resp, err
}

// recorder keeps the last error response of one call (status, headers,
// body) so a 429's global flag and Retry-After survive discordgo.
type recorder struct {
	mu     sync.Mutex
	code   int
	header http.Header
	body   []byte
}

func (r *recorder) keep(resp *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.code, r.header, r.body = resp.StatusCode, resp.Header.Clone(), body
}

func (r *recorder) status() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code
}

// rateLimited reads the wait from the body's retry_after (seconds,
// fractional), falling back to the Retry-After and
// X-RateLimit-Reset-After headers; global from the body or the
// X-RateLimit-Global / X-RateLimit-Scope headers.
func (r *recorder) rateLimited(rl *discordgo.RateLimitError) *channels.RateLimited {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := &channels.RateLimited{}
	if rl != nil && rl.RateLimit != nil && rl.TooManyRequests != nil {
		out.RetryAfter = rl.TooManyRequests.RetryAfter
	}
	var body struct {
		RetryAfter *float64 `json:"retry_after"`
		Global     bool     `json:"global"`
	}
	if len(r.body) > 0 && discordgo.Unmarshal(r.body, &body) == nil {
		out.Global = body.Global
		if out.RetryAfter <= 0 && body.RetryAfter != nil {
			out.RetryAfter = time.Duration(*body.RetryAfter * float64(time.Second))
		}
	}
	if r.header != nil {
		if strings.EqualFold(r.header.Get("X-RateLimit-Global"), "true") || r.header.Get("X-RateLimit-Scope") == "global" {
			out.Global = true
		}
		for _, h := range []string{"Retry-After", "X-RateLimit-Reset-After"} {
			if out.RetryAfter > 0 {
				break
			}
			if f, err := strconv.ParseFloat(r.header.Get(h), 64); err == nil && f > 0 {
				out.RetryAfter = time.Duration(f * float64(time.Second))
			}
		}
	}
	if out.RetryAfter <= 0 {
		out.RetryAfter = time.Second
	}
	return out
}
