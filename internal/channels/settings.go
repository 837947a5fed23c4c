package channels

import (
	"sync"
	"time"
)

// Platform types.
const (
	TypeTelegram = "telegram"
	TypeSlack    = "slack"
	TypeDiscord  = "discord"
	TypeWhatsApp = "whatsapp"
)

// Settings are the effective settings of one messaging channel
// (config.yaml's channels.<id> with the API's overrides on top).
// Credential fields are secrets: never logged, redacted in every view.
type Settings struct {
	ID      string
	Type    string
	Enabled bool
	// Agent answers the channel's messages.
	Agent string
	// Mode is how messages arrive: telegram polling (default) or webhook;
	// slack events (default) or socket; discord and whatsapp have one.
	Mode string
	// APIBaseURL is the platform API root ("" = the platform's own).
	// Telegram's layout is {api_base_url}/bot{token}/{method}.
	APIBaseURL string
	// PublicURL is where the platform reaches this channel's ingress
	// (Telegram webhook mode's setWebhook url).
	PublicURL string

	BotToken      string // telegram, slack (xoxb-), discord
	SigningSecret string // slack events
	AppToken      string // slack socket mode (xapp-)
	SecretToken   string // telegram webhook mode's secret_token

	// Trigger is a phrase that activates the agent in groups (stripped
	// from the text); mentions of the bot always activate.
	Trigger      string
	AllowGroups  bool
	AllowedChats []string
	AllowedUsers []string
}

// Status is an adapter's live state, shown by GET /channels/{id} and the
// console. Safe for concurrent use.
type Status struct {
	mu            sync.Mutex
	state         string
	since         time.Time
	lastError     string
	lastErrorAt   time.Time
	lastMessageAt time.Time
	received      int64
	ignored       int64
	detail        map[string]string
}

// Adapter states.
const (
	StateStopped      = "stopped"
	StateConnecting   = "connecting"
	StateConnected    = "connected"
	StateUnauthorized = "unauthorized"
	StateError        = "error"
	// WhatsApp's pairing states.
	StateUnpaired = "unpaired"
	StatePairing  = "pairing"
	StatePaired   = "paired"
)

// SetState records a state change (since = now when it changed).
func (s *Status) SetState(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != state {
		s.state, s.since = state, time.Now().UTC()
	}
}

// SetError records the last error (and keeps the state).
func (s *Status) SetError(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastError, s.lastErrorAt = err.Error(), time.Now().UTC()
}

// Received counts an inbound message the adapter handed to the sink (the
// adapter calls it).
func (s *Status) Received() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received++
	s.lastMessageAt = time.Now().UTC()
}

// Ignored counts a message not answered: dropped by the adapter (edits,
// stickers) or by the activation rules.
func (s *Status) Ignored() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignored++
}

// SetDetail sets a platform-specific field ("" removes it): the WhatsApp
// QR code while pairing, the Telegram offset, the bot's user name.
func (s *Status) SetDetail(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detail == nil {
		s.detail = map[string]string{}
	}
	if value == "" {
		delete(s.detail, key)
	} else {
		s.detail[key] = value
	}
}

// StatusView is a copy of a Status for the API.
type StatusView struct {
	State         string            `json:"state"`
	Since         *time.Time        `json:"since,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	LastErrorAt   *time.Time        `json:"last_error_at,omitempty"`
	LastMessageAt *time.Time        `json:"last_message_at,omitempty"`
	Received      int64             `json:"received"`
	Ignored       int64             `json:"ignored"`
	Detail        map[string]string `json:"detail,omitempty"`
}

// View copies the status.
func (s *Status) View() StatusView {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := StatusView{State: s.state, LastError: s.lastError, Received: s.received, Ignored: s.ignored}
	if v.State == "" {
		v.State = StateStopped
	}
	v.Since, v.LastErrorAt, v.LastMessageAt = timePtr(s.since), timePtr(s.lastErrorAt), timePtr(s.lastMessageAt)
	if len(s.detail) > 0 {
		v.Detail = make(map[string]string, len(s.detail))
		for k, val := range s.detail {
			v.Detail[k] = val
		}
	}
	return v
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
