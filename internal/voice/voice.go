// Package voice mints realtime voice sessions with an OpenAI-Realtime-
// compatible provider (config voice) for agents that opt in (voice: true).
//
// The browser or app gets a short-lived client secret, never the provider
// key. Before minting, the session's worst case for its maximum length is
// admitted by the one cost controller (ledger source voice), so a hard
// budget that cannot cover it refuses the mint (402) and a clamped
// admission shortens the session. The gateway then holds a server-side
// control connection to the session (the provider's ?call_id= sideband),
// sums the usage of every response.done on it, hangs the session up when
// its cap passes, and settles the admission from that usage when the
// session ends.
package voice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/realtime"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
)

// Worst-case token rates of a session, reserved for every second of its
// maximum length: audio input is about 10 tokens a second, spoken output
// about 20.
const (
	InputTokensPerSecond  = 10
	OutputTokensPerSecond = 20
)

// DefaultBaseURL is the provider root when voice.base_url is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// ErrNotConfigured: voice.provider is empty (503 not_enabled).
var ErrNotConfigured = fault.NotEnabled("voice is not configured: set voice.provider and voice.model (agentry voice setup)")

// Lookup finds agents (agentdef.Registry).
type Lookup interface {
	Get(id string) (*agentdef.Definition, bool)
}

// Service mints and meters sessions. Config, Agents and Gate are required.
type Service struct {
	Config func() config.VoiceConfig
	Agents Lookup
	// Gate is the cost controller.
	Gate llm.Gate
	// HTTP is the client of the provider (nil: a default one).
	HTTP *http.Client

	wg       sync.WaitGroup
	stopOnce sync.Once
	stopped  chan struct{}
}

func (s *Service) stopCh() chan struct{} {
	s.stopOnce.Do(func() { s.stopped = make(chan struct{}) })
	return s.stopped
}

// Close ends every session now (hung up at the provider, settled from the
// usage seen so far) and waits for their settlements: call it before the
// cost controller closes.
func (s *Service) Close() {
	ch := s.stopCh()
	select {
	case <-ch:
	default:
		close(ch)
	}
	s.wg.Wait()
}

// Session is a minted session: what the browser needs to connect.
type Session struct {
	ID           string    `json:"id"`
	AgentID      string    `json:"agent_id"`
	RunID        string    `json:"run_id"`
	Model        string    `json:"model"`
	ClientSecret string    `json:"client_secret"`
	ExpiresAt    time.Time `json:"expires_at"`
	// URL is the provider's realtime WebSocket for the client.
	URL string `json:"url"`
	// MaxSeconds is when the gateway ends the session.
	MaxSeconds int `json:"max_seconds"`
}

// Who is the caller a session is attributed to.
type Who struct{ Subject string }

func (s *Service) key(cfg config.VoiceConfig) string {
	if cfg.APIKeyEnv != "" {
		if v := os.Getenv(cfg.APIKeyEnv); v != "" {
			return v
		}
	}
	return cfg.APIKey
}

func baseURL(cfg config.VoiceConfig) string {
	if cfg.BaseURL == "" {
		return DefaultBaseURL
	}
	return strings.TrimRight(cfg.BaseURL, "/")
}

// Mint admits a session's worst case, mints a client secret and starts
// metering it.
func (s *Service) Mint(ctx context.Context, agentID string, who Who) (*Session, error) {
	cfg := s.Config()
	if cfg.Provider == "" {
		return nil, ErrNotConfigured
	}
	def, ok := s.Agents.Get(agentID)
	if !ok {
		return nil, fmt.Errorf("%w: %s", agentdef.ErrNotFound, agentID)
	}
	if !def.Voice {
		return nil, &fault.Invalid{Field: "agent_id", Msg: fmt.Sprintf("agent %q has no voice (set voice: true in its definition)", agentID)}
	}
	if !def.IsEnabled() {
		return nil, fault.Conflict("agent_disabled", fmt.Sprintf("agent %q is disabled", agentID))
	}
	secs := cfg.SessionSeconds()
	runID := "voice_" + uuid.NewString()
	call := &llm.Call{Provider: cfg.Provider, Model: cfg.Model,
		Request: llm.Request{Model: cfg.Model, ReserveInputTokens: int64(secs * InputTokensPerSecond), MaxTokens: secs * OutputTokensPerSecond},
		Meta: llm.CallMeta{Subject: who.Subject, AgentID: agentID, RunID: runID, SessionID: runID, Source: llm.SourceVoice,
			Trigger: "voice", Interactive: true, ConfirmCost: true}}
	adm, err := s.Gate.Admit(ctx, call)
	if err != nil {
		return nil, err
	}
	settle := func(usage llm.Usage, reported bool, err error) {
		if adm != nil {
			adm.Settle(detached.Context(ctx), &llm.Response{Usage: usage, UsageReported: reported, Model: cfg.Model}, err, 1)
		}
	}
	// A clamped admission (a budget that covers only part of the worst
	// case) shortens the session to what it covers.
	if got := call.Request.MaxTokens / OutputTokensPerSecond; got < secs {
		secs = max(got, 1)
	}
	key := s.key(cfg)
	opts := []option.RequestOption{option.WithBaseURL(baseURL(cfg) + "/"), option.WithAPIKey(key), option.WithMaxRetries(0)}
	if s.HTTP != nil {
		opts = append(opts, option.WithHTTPClient(s.HTTP))
	}
	client := openai.NewClient(opts...)
	params := realtime.ClientSecretNewParams{
		ExpiresAfter: realtime.ClientSecretNewParamsExpiresAfter{Seconds: openai.Int(60)},
		Session: realtime.ClientSecretNewParamsSessionUnion{OfRealtime: &realtime.RealtimeSessionCreateRequestParam{
			Model: realtime.RealtimeSessionCreateRequestModel(cfg.Model)}},
	}
	if def.SystemPrompt != "" {
		params.Session.OfRealtime.Instructions = openai.String(def.SystemPrompt)
	}
	secret, err := client.Realtime.ClientSecrets.New(ctx, params)
	if err != nil {
		settle(llm.Usage{}, true, err)
		return nil, &fault.Error{Kind: fault.KindUpstream, Code: "provider_error", Msg: "the voice provider did not mint a session: " + providerMessage(err), Opaque: true}
	}
	id := secret.Session.ID
	wsBase := "ws" + strings.TrimPrefix(baseURL(cfg), "http") + "/realtime"
	ctl, _, err := websocket.Dial(ctx, wsBase+"?call_id="+id, &websocket.DialOptions{HTTPClient: s.HTTP,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		s.hangup(cfg, key, id)
		settle(llm.Usage{}, true, err)
		return nil, &fault.Error{Kind: fault.KindUpstream, Code: "provider_error", Msg: "the gateway could not open the session's control connection", Opaque: true}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		usage, reported := s.monitor(ctl, time.Duration(secs)*time.Second)
		s.hangup(cfg, key, id)
		settle(usage, reported, nil)
	}()
	return &Session{ID: id, AgentID: agentID, RunID: runID, Model: cfg.Model, ClientSecret: secret.Value,
		ExpiresAt: time.Unix(secret.ExpiresAt, 0).UTC(), URL: wsBase + "?model=" + cfg.Model, MaxSeconds: secs}, nil
}

// monitor reads the control connection until the session ends or its cap
// passes, summing the usage of every response.done.
func (s *Service) monitor(ctl *websocket.Conn, limit time.Duration) (llm.Usage, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	defer ctl.CloseNow()
	go func() {
		select {
		case <-s.stopCh():
			cancel()
		case <-ctx.Done():
		}
	}()
	ctl.SetReadLimit(16 << 20)
	var total llm.Usage
	reported := false
	for {
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				Usage *struct {
					InputTokens        int64 `json:"input_tokens"`
					OutputTokens       int64 `json:"output_tokens"`
					InputTokensDetails struct {
						CachedTokens int64 `json:"cached_tokens"`
					} `json:"input_token_details"`
				} `json:"usage"`
			} `json:"response"`
		}
		if err := wsjson.Read(ctx, ctl, &ev); err != nil {
			// The session ended, or its cap passed (the caller hangs up).
			return total, reported
		}
		if ev.Type == "response.done" && ev.Response.Usage != nil {
			u := ev.Response.Usage
			total = total.Add(llm.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.InputTokensDetails.CachedTokens})
			reported = true
		}
	}
}

// hangup ends a session at the provider (best effort: a session whose
// clients left is already over).
func (s *Service) hangup(cfg config.VoiceConfig, key, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL(cfg)+"/realtime/calls/"+id+"/hangup", nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+key)
	hc := s.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// providerMessage is the provider's status without the request (which
// carries no key, but the message is the provider's to word).
func providerMessage(err error) string {
	var ae *openai.Error
	if errors.As(err, &ae) {
		return fmt.Sprintf("%d %s", ae.StatusCode, http.StatusText(ae.StatusCode))
	}
	return "the provider could not be reached"
}

// ConsoleOrigins are the origins the console's push-to-talk panel connects
// to: the provider's realtime WebSocket (ws:// or wss:// of voice.base_url's
// host). None when voice is off.
func ConsoleOrigins(cfg config.VoiceConfig) []string {
	if cfg.Provider == "" {
		return nil
	}
	u, err := url.Parse(baseURL(cfg))
	if err != nil || u.Host == "" {
		return nil
	}
	scheme := "wss"
	if u.Scheme == "http" {
		scheme = "ws"
	}
	return []string{scheme + "://" + u.Host}
}
