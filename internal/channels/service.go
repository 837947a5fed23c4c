package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/models"
)

// Errors of the service, in the fault vocabulary.
var (
	ErrNotRunning = fault.Conflict("channel_not_running", "channel is not running")
	ErrNoIngress  = fault.NotFound("this channel takes no callbacks")
	ErrNotPaired  = fault.Conflict("not_pairable", "this channel is not paired by QR code")
)

// Enqueuer hands an accepted inbound message to durable processing (the
// conversation's workflow; ingress.go).
type Enqueuer interface {
	Enqueue(ctx context.Context, channelID, agentID string, m Inbound) error
}

// Service runs the messaging channels of a gateway: it resolves their
// settings (config.yaml, then the API's changes), runs each enabled
// channel's receiver, routes platform callbacks, and sends for the
// activities (on the running adapter, or a send-only one in a process that
// does not receive).
type Service struct {
	Config    *config.Config
	Store     models.ChannelStore
	Secrets   SecretStore
	Factories map[string]Factory
	// Enqueue takes accepted messages (nil: receive nothing).
	Enqueue Enqueuer
	HTTP    *http.Client
	Log     *slog.Logger
	// Agents, when set, finds the agent of a channel without an agent
	// setting: the one enabled agent whose definition lists the channel
	// id in `channels`.
	Agents interface {
		List() []*agentdef.Definition
	}
	// Unpaced turns the send pacing off (benchmarks of the gateway's own
	// capacity; a platform's 429 is still honoured).
	Unpaced bool

	// reloads serialises Reload and Stop: two settings changes of one
	// channel at once must not leave two receivers of one bot.
	reloads  sync.Mutex
	mu       sync.Mutex
	ctx      context.Context // the gateway's: receivers run under it
	running  map[string]*running
	senders  map[string]Adapter
	statuses map[string]*Status
	limiters map[string]*Limiter
}

type running struct {
	adapter  Adapter
	settings Settings
	cancel   context.CancelFunc
	done     chan struct{}
}

func (s *Service) init() {
	if s.running == nil {
		s.running, s.senders, s.statuses, s.limiters = map[string]*running{}, map[string]Adapter{}, map[string]*Status{}, map[string]*Limiter{}
	}
}

func (s *Service) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func (s *Service) status(id string) *Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	st, ok := s.statuses[id]
	if !ok {
		st = &Status{}
		s.statuses[id] = st
	}
	return st
}

// Settings returns a channel's effective settings and the keys the API
// changed.
func (s *Service) Settings(ctx context.Context, id string) (Settings, []string, error) {
	return resolve(ctx, s.Config, s.Store, s.Secrets, id)
}

// Start runs the receivers of the enabled channels until ctx ends.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	s.init()
	s.ctx = ctx
	s.mu.Unlock()
	for _, id := range IDs(s.Config) {
		if err := s.Reload(ctx, id); err != nil {
			s.logger().Warn("channel not started", "channel", id, "err", err)
		}
	}
}

// Stop stops every receiver and waits for them.
func (s *Service) Stop() {
	s.reloads.Lock()
	defer s.reloads.Unlock()
	s.mu.Lock()
	rs := make([]*running, 0, len(s.running))
	for id, r := range s.running {
		rs = append(rs, r)
		delete(s.running, id)
	}
	s.mu.Unlock()
	for _, r := range rs {
		r.cancel()
		<-r.done
	}
}

// Reload (re)starts a channel's receiver with its current settings, or
// stops it when the channel is disabled. Without Start (a send-only
// process) it only forgets the cached sender.
func (s *Service) Reload(ctx context.Context, id string) error {
	s.reloads.Lock()
	defer s.reloads.Unlock()
	set, _, err := s.Settings(ctx, id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.init()
	delete(s.senders, id)
	old := s.running[id]
	delete(s.running, id)
	base := s.ctx
	s.mu.Unlock()
	st := s.status(id)
	if old != nil {
		old.cancel()
		<-old.done
	}
	if base == nil || s.Enqueue == nil {
		return nil
	}
	if !set.Enabled {
		st.SetState(StateStopped)
		return nil
	}
	f, ok := s.Factories[set.Type]
	if !ok {
		err := fmt.Errorf("no %s adapter in this build", set.Type)
		st.SetState(StateError)
		st.SetError(err)
		return err
	}
	a, err := f(s.deps(set, st, true))
	if err != nil {
		st.SetState(StateError)
		st.SetError(err)
		return err
	}
	rctx, cancel := context.WithCancel(base)
	r := &running{adapter: a, settings: set, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.running[id] = r
	s.mu.Unlock()
	go s.receive(rctx, r, st)
	return nil
}

// receive runs an adapter's receiver, restarting it after failures with
// backoff; refused credentials stop it (the status says so) until the
// settings change.
func (s *Service) receive(ctx context.Context, r *running, st *Status) {
	defer close(r.done)
	id := r.settings.ID
	backoff := time.Second
	for ctx.Err() == nil {
		started := time.Now()
		err := r.adapter.Receive(ctx)
		if ctx.Err() != nil {
			st.SetState(StateStopped)
			return
		}
		var unauth *Unauthorized
		if errors.As(err, &unauth) {
			st.SetState(StateUnauthorized)
			st.SetError(err)
			s.logger().Error("channel stopped: the platform refused its credentials", "channel", id, "err", err)
			return
		}
		if err == nil {
			err = errors.New("the receiver ended")
		}
		st.SetState(StateError)
		st.SetError(err)
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		s.logger().Warn("channel receiver failed; restarting", "channel", id, "err", err, "in", backoff)
		if sleep(ctx, backoff) != nil {
			st.SetState(StateStopped)
			return
		}
		backoff = min(backoff*2, time.Minute)
	}
}

func (s *Service) deps(set Settings, st *Status, receiving bool) Deps {
	d := Deps{Settings: set, Cursors: s.Store, HTTP: s.HTTP, Status: st,
		Logf: func(format string, args ...any) {
			s.logger().Info(fmt.Sprintf(format, args...), "channel", set.ID)
		}}
	if d.HTTP == nil {
		d.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	if receiving {
		d.Sink = s.sink(set, st)
	}
	return d
}

// sink applies the activation rules and hands what they let through to
// durable processing.
func (s *Service) sink(set Settings, st *Status) Sink {
	return func(ctx context.Context, m Inbound) error {
		d := Activate(set, m)
		if !d.Answer {
			st.Ignored()
			s.logger().Debug("channel message not answered", "channel", set.ID, "chat", m.ChatID, "message", m.MessageID, "why", d.Reason)
			return nil
		}
		agent, err := s.agentOf(set)
		if err != nil {
			st.Ignored()
			st.SetError(err)
			return nil
		}
		m.Text = capText(d.Text)
		if err := s.Enqueue.Enqueue(ctx, set.ID, agent, m); err != nil {
			st.SetError(err)
			return err
		}
		return nil
	}
}

// agentOf is the agent that answers a channel: its agent setting, else
// the one enabled agent that lists the channel in its definition's
// `channels`.
func (s *Service) agentOf(set Settings) (string, error) {
	if set.Agent != "" {
		return set.Agent, nil
	}
	var ids []string
	if s.Agents != nil {
		for _, d := range s.Agents.List() {
			if d.IsEnabled() && slices.Contains(d.Channels, set.ID) {
				ids = append(ids, d.ID)
			}
		}
	}
	switch len(ids) {
	case 1:
		return ids[0], nil
	case 0:
		return "", fmt.Errorf("no agent answers this channel: set channels.%s.agent, or list %s in one agent's channels", set.ID, set.ID)
	}
	sort.Strings(ids)
	return "", fmt.Errorf("agents %s all list channel %s: set channels.%s.agent to choose one", strings.Join(ids, ", "), set.ID, set.ID)
}

// MaxInboundText bounds the text of a message handed to an agent: it
// travels in workflow history (Temporal limits payloads to 2 MB). The
// platforms bound theirs lower, except WhatsApp.
const MaxInboundText = 64 << 10

// capText cuts text to MaxInboundText bytes at a rune boundary.
func capText(text string) string {
	if len(text) <= MaxInboundText {
		return text
	}
	cut := MaxInboundText
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}

// adapter is the running adapter of a channel, else a send-only one.
func (s *Service) adapter(ctx context.Context, id string) (Adapter, *Limiter, error) {
	s.mu.Lock()
	s.init()
	a := s.senders[id]
	if r, ok := s.running[id]; ok {
		a = r.adapter
	}
	s.mu.Unlock()
	if a == nil {
		set, _, err := s.Settings(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		f, ok := s.Factories[set.Type]
		if !ok {
			return nil, nil, fmt.Errorf("no %s adapter in this build", set.Type)
		}
		if a, err = f(s.deps(set, s.status(id), false)); err != nil {
			return nil, nil, err
		}
		s.mu.Lock()
		s.senders[id] = a
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lim, ok := s.limiters[id]
	if !ok {
		lim = NewLimiter(a.Limits())
		s.limiters[id] = lim
	}
	return a, lim, nil
}

// Limits are a channel's platform limits.
func (s *Service) Limits(ctx context.Context, id string) (Limits, error) {
	a, _, err := s.adapter(ctx, id)
	if err != nil {
		return Limits{}, err
	}
	return a.Limits(), nil
}

// Send sends one part on a channel, paced by the bot's limiter; a
// platform 429 pauses every send of the bot for its retry_after.
func (s *Service) Send(ctx context.Context, id string, out Outbound) (Sent, error) {
	a, lim, err := s.adapter(ctx, id)
	if err != nil {
		return Sent{}, err
	}
	if !s.Unpaced {
		if err := lim.Wait(ctx, out.ChatID, out.Group); err != nil {
			return Sent{}, err
		}
	}
	sent, err := a.Send(ctx, out)
	var limited *RateLimited
	if errors.As(err, &limited) {
		lim.Pause(limited.RetryAfter)
	}
	if err != nil {
		s.status(id).SetError(err)
	}
	return sent, err
}

// Ingress routes a platform callback to the channel's running adapter.
func (s *Service) Ingress(ctx context.Context, id string, req IngressRequest) (IngressResponse, error) {
	s.mu.Lock()
	s.init()
	r, ok := s.running[id]
	s.mu.Unlock()
	if !ok {
		if !IsChannel(s.Config, id) {
			return IngressResponse{}, fmt.Errorf("%w: %s", ErrUnknownChannel, id)
		}
		return IngressResponse{}, fmt.Errorf("%w: %s (enable it first)", ErrNotRunning, id)
	}
	h, ok := r.adapter.(IngressHandler)
	if !ok {
		return IngressResponse{}, fmt.Errorf("%w: %s receives by %s", ErrNoIngress, id, modeOf(r.settings))
	}
	return h.Ingress(ctx, req), nil
}

func modeOf(s Settings) string {
	if s.Mode != "" {
		return s.Mode
	}
	if m := config.ChannelModes(s.Type); len(m) > 0 {
		return m[0]
	}
	return "its own connection"
}

// Pair starts pairing a QR-paired channel; the code shows in its status.
func (s *Service) Pair(ctx context.Context, id string) error {
	s.mu.Lock()
	s.init()
	r, ok := s.running[id]
	base := s.ctx
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s (enable it first)", ErrNotRunning, id)
	}
	p, ok := r.adapter.(Pairer)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotPaired, id)
	}
	// Pairing outlives the request that asked for it.
	pctx, cancel := context.WithTimeout(base, 3*time.Minute)
	if err := p.StartPairing(pctx); err != nil {
		cancel()
		return err
	}
	go func() { <-pctx.Done(); cancel() }()
	return nil
}

// Unpair logs a QR-paired channel's device out.
func (s *Service) Unpair(ctx context.Context, id string) error {
	s.mu.Lock()
	s.init()
	r, ok := s.running[id]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s (enable it first)", ErrNotRunning, id)
	}
	p, ok := r.adapter.(Pairer)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotPaired, id)
	}
	return p.Unpair(ctx)
}

// View is a messaging channel as the API shows it: credentials redacted.
type View struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Enabled    bool           `json:"enabled"`
	Settings   map[string]any `json:"settings"`
	Overridden []string       `json:"overridden"`
	Adapter    StatusView     `json:"adapter"`
	Messages   MessageStats   `json:"messages"`
}

// MessageStats count a channel's inbound messages.
type MessageStats struct {
	Received      int64      `json:"received"`
	Answered      int64      `json:"answered"`
	Failed        int64      `json:"failed"`
	LastMessageAt *time.Time `json:"last_message_at,omitempty"`
	LastChat      string     `json:"last_chat,omitempty"`
	LastStatus    string     `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
}

// View returns one channel.
func (s *Service) View(ctx context.Context, id string) (*View, error) {
	set, over, err := s.Settings(ctx, id)
	if err != nil {
		return nil, err
	}
	redact := func(v string) string {
		if v == "" {
			return ""
		}
		return config.Redacted
	}
	nonNil := func(l []string) []string {
		if l == nil {
			return []string{}
		}
		return l
	}
	v := &View{ID: id, Type: set.Type, Enabled: set.Enabled, Overridden: over, Adapter: s.status(id).View(),
		Settings: map[string]any{"type": set.Type, "enabled": set.Enabled, "agent": set.Agent, "mode": modeOf(set), "api_base_url": set.APIBaseURL,
			"public_url": set.PublicURL, "trigger": set.Trigger, "allow_groups": set.AllowGroups, "allowed_chats": nonNil(set.AllowedChats),
			"allowed_users": nonNil(set.AllowedUsers), "bot_token": redact(set.BotToken), "signing_secret": redact(set.SigningSecret),
			"app_token": redact(set.AppToken), "secret_token": redact(set.SecretToken), "ingress_path": "/ingress/" + id}}
	if v.Overridden == nil {
		v.Overridden = []string{}
	}
	st, err := s.Store.ChannelMessageStats(ctx, id)
	if err != nil {
		return nil, err
	}
	v.Messages = MessageStats{Received: st.Received, Answered: st.Answered, Failed: st.Failed}
	if st.Last != nil {
		at := st.Last.ReceivedAt.UTC()
		v.Messages.LastMessageAt, v.Messages.LastChat, v.Messages.LastStatus, v.Messages.LastError = &at, st.Last.ChatID, st.Last.Status, st.Last.Error
	}
	return v, nil
}

// Patch changes a channel's settings (keys: SettingKeys). Credentials go
// to the secret store (an empty value clears one; "********" written back
// as read keeps it); everything is checked before anything is stored, and
// the channel restarts with the new settings.
func (s *Service) Patch(ctx context.Context, id string, settings map[string]any, who string) (*View, error) {
	if !IsChannel(s.Config, id) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownChannel, id)
	}
	if len(settings) == 0 {
		return nil, settingError("", "no settings given (keys: "+strings.Join(SettingKeys(), ", ")+")")
	}
	cur, _, err := s.Settings(ctx, id)
	if err != nil {
		return nil, err
	}
	row, err := s.Store.GetChannelSetting(ctx, id)
	if err != nil {
		return nil, err
	}
	over := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(row.Settings), &over); err != nil {
		return nil, fmt.Errorf("settings of channel %s in the database: %w", id, err)
	}
	secretKeys := splitList(row.SecretKeys)
	newSecrets := map[string]string{}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := settings[k]
		if isCredential(k) {
			str, ok := v.(string)
			if !ok && v != nil {
				return nil, settingError(k, "expected a string")
			}
			if str == config.Redacted {
				continue // written back as read: unchanged
			}
			newSecrets[k] = strings.TrimSpace(str)
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, settingError(k, err.Error())
		}
		if err := apply(&cur, k, raw); err != nil {
			return nil, err
		}
		over[k] = raw
	}
	if len(newSecrets) > 0 && s.Secrets == nil {
		return nil, settingError("bot_token", "this gateway has no secret store")
	}
	for k, v := range newSecrets {
		if v == "" {
			if err := s.Secrets.Delete(ctx, secretName(id, k)); err != nil && !errors.Is(err, secrets.ErrNotFound) {
				return nil, fmt.Errorf("clear channel %s's %s: %w", id, k, err)
			}
		} else if err := s.Secrets.Set(ctx, secretName(id, k), v); err != nil {
			return nil, settingError(k, err.Error())
		}
		if !slices.Contains(secretKeys, k) {
			secretKeys = append(secretKeys, k)
		}
	}
	sort.Strings(secretKeys)
	b, _ := json.Marshal(over)
	row.Settings, row.SecretKeys, row.UpdatedBy = string(b), strings.Join(secretKeys, ","), who
	if err := s.Store.SaveChannelSetting(ctx, row); err != nil {
		return nil, err
	}
	if err := s.Reload(ctx, id); err != nil {
		s.logger().Warn("channel not restarted", "channel", id, "err", err)
	}
	return s.View(ctx, id)
}

func isCredential(k string) bool { return slices.Contains(credentialKeys, k) }

// IsMessaging tells whether id is a messaging channel (delivery.MessagingChannels).
func (s *Service) IsMessaging(id string) bool { return IsChannel(s.Config, id) }

// ErrNoChat is a message to a messaging channel without a chat.
var ErrNoChat = fault.Conflict("no_destination", "a message to a messaging channel needs to (the chat id)")

// CheckChat tells whether a message can go to chat on channel id now: the
// channel is enabled and chat is named (delivery.MessagingChannels).
func (s *Service) CheckChat(ctx context.Context, id, chat string) error {
	set, _, err := s.Settings(ctx, id)
	if err != nil {
		return err
	}
	if !set.Enabled {
		return fault.Conflict("channel_disabled", "channel is disabled: "+id)
	}
	if strings.TrimSpace(chat) == "" {
		return fmt.Errorf("%w (channel %s)", ErrNoChat, id)
	}
	if _, ok := s.Factories[set.Type]; !ok {
		return fmt.Errorf("no %s adapter in this build", set.Type)
	}
	return nil
}
