package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Health is GET /health.
type Health struct {
	Raw
	Status  string                 `json:"status"`
	Version string                 `json:"version"`
	Checks  map[string]HealthCheck `json:"checks"`
}

// HealthCheck is one dependency in Health.
type HealthCheck struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Health reads GET /health. A degraded gateway answers 503 with the same
// body; that is returned as a Health, not an error.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	err := c.Do(ctx, http.MethodGet, "/health", nil, &h)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
		h.setRaw(ae.Body)
		if json.Unmarshal(ae.Body, &h) == nil && h.Status != "" {
			return &h, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// Whoami is GET /whoami: the authenticated principal.
type Whoami struct {
	Raw
	Subject string `json:"subject"`
	Role    string `json:"role"`
	Method  string `json:"method"`
}

// Whoami checks the credentials.
func (c *Client) Whoami(ctx context.Context) (*Whoami, error) {
	var w Whoami
	return &w, c.Do(ctx, http.MethodGet, "/whoami", nil, &w)
}

// AgentLLM is the llm part of an agent.
type AgentLLM struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens,omitempty"`
}

// Agent is the single form of an agent (the list form has fewer fields).
type Agent struct {
	Raw
	ID           string          `json:"id"`
	Name         string          `json:"name,omitempty"`
	Description  string          `json:"description"`
	LLM          AgentLLM        `json:"llm"`
	Channels     []string        `json:"channels"`
	Builtins     []string        `json:"builtins"`
	SystemPrompt string          `json:"system_prompt,omitempty"`
	Enabled      *bool           `json:"enabled,omitempty"`
	Trigger      string          `json:"trigger,omitempty"`
	Schedule     json.RawMessage `json:"schedule,omitempty"`
	MaxTurns     int             `json:"max_turns,omitempty"`
}

// AgentList is GET /agents.
type AgentList struct {
	Raw
	Agents []Agent `json:"agents"`
}

// Agents lists the agents.
func (c *Client) Agents(ctx context.Context) (*AgentList, error) {
	var l AgentList
	return &l, c.Do(ctx, http.MethodGet, "/agents", nil, &l)
}

// Agent reads one agent.
func (c *Client) Agent(ctx context.Context, id string) (*Agent, error) {
	var a Agent
	return &a, c.Do(ctx, http.MethodGet, "/agents/"+url.PathEscape(id), nil, &a)
}

// CreateAgent sends a definition (YAML text); file names it in errors.
func (c *Client) CreateAgent(ctx context.Context, definition, file string) (*Agent, error) {
	var a Agent
	return &a, c.Do(ctx, http.MethodPost, "/agents", map[string]string{"definition": definition, "file": file}, &a)
}

// SetAgentEnabled enables or disables an agent.
func (c *Client) SetAgentEnabled(ctx context.Context, id string, on bool) (*Agent, error) {
	verb := "disable"
	if on {
		verb = "enable"
	}
	var a Agent
	return &a, c.Do(ctx, http.MethodPost, "/agents/"+url.PathEscape(id)+"/"+verb, nil, &a)
}

// DeleteAgent removes an agent's definition file.
func (c *Client) DeleteAgent(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/agents/"+url.PathEscape(id), nil, nil)
}

// TriggerRequest runs an agent now.
type TriggerRequest struct {
	Text   string `json:"text,omitempty"`
	UserID string `json:"user_id,omitempty"`
	Source string `json:"source,omitempty"`
}

// Usage is the token usage of a run.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
}

// RunReply is the answer of a chat or trigger.
type RunReply struct {
	Raw
	Reply      string `json:"reply"`
	SessionID  string `json:"session_id"`
	RunID      string `json:"run_id"`
	ResponseID string `json:"response_id"`
	// Usage and CostUSD are sent by the trigger route when known.
	Usage   *Usage   `json:"usage,omitempty"`
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// TriggerAgent runs an agent synchronously.
func (c *Client) TriggerAgent(ctx context.Context, id string, req TriggerRequest) (*RunReply, error) {
	var r RunReply
	return &r, c.Do(ctx, http.MethodPost, "/agents/"+url.PathEscape(id)+"/trigger", req, &r)
}

// ChatRequest is the spec's chat request (the fields the client sends).
type ChatRequest struct {
	AgentID   string `json:"agent_id"`
	Text      string `json:"text"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// StreamError is an `event: error` frame of a stream.
type StreamError struct{ Message string }

func (e *StreamError) Error() string { return e.Message }

// ChatStream streams a reply: onDelta gets each text chunk as it arrives.
// It returns the ids of the run (from the done frame, when the gateway
// sends one) or a *StreamError when the run failed mid-stream.
func (c *Client) ChatStream(ctx context.Context, req ChatRequest, onDelta func(string) error) (*RunReply, error) {
	var done RunReply
	var streamErr error
	finished := false
	err := c.Stream(ctx, http.MethodPost, "/chat/stream?meta=true", req, func(ev Event) error {
		switch ev.Name {
		case "error":
			var env struct {
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(ev.Data), &env) != nil || env.Error == "" {
				env.Error = ev.Data
			}
			streamErr = &StreamError{Message: env.Error}
			return nil
		case "done":
			done.setRaw([]byte(ev.Data))
			_ = json.Unmarshal([]byte(ev.Data), &done)
			return nil
		case "", "message":
			if ev.Data == "[DONE]" {
				finished = true
				return io.EOF
			}
			return onDelta(ev.Data)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if streamErr != nil {
		return nil, streamErr
	}
	if !finished {
		return nil, &StreamError{Message: "the stream ended before [DONE]; the reply may be incomplete"}
	}
	return &done, nil
}

// Channel is one channel adapter with its status.
type Channel struct {
	Raw
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Enabled  bool           `json:"enabled"`
	Settings map[string]any `json:"settings"`
	Status   ChannelStatus  `json:"status"`
}

// ChannelStatus is the delivery state of a channel.
type ChannelStatus struct {
	LastDeliveryAt *time.Time `json:"last_delivery_at"`
	LastStatus     string     `json:"last_status"`
	LastError      string     `json:"last_error"`
	Failures       int64      `json:"failures"`
	Deliveries     int64      `json:"deliveries"`
}

// ChannelList is GET /channels.
type ChannelList struct {
	Raw
	Channels []Channel `json:"channels"`
}

// Channels lists channel adapters.
func (c *Client) Channels(ctx context.Context) (*ChannelList, error) {
	var l ChannelList
	return &l, c.Do(ctx, http.MethodGet, "/channels", nil, &l)
}

// Channel reads one channel.
func (c *Client) Channel(ctx context.Context, id string) (*Channel, error) {
	var ch Channel
	return &ch, c.Do(ctx, http.MethodGet, "/channels/"+url.PathEscape(id), nil, &ch)
}

// SetChannelEnabled enables or disables a channel.
func (c *Client) SetChannelEnabled(ctx context.Context, id string, on bool) (*Channel, error) {
	verb := "disable"
	if on {
		verb = "enable"
	}
	var ch Channel
	return &ch, c.Do(ctx, http.MethodPost, "/channels/"+url.PathEscape(id)+"/"+verb, nil, &ch)
}

// UpdateChannel changes channel settings.
func (c *Client) UpdateChannel(ctx context.Context, id string, settings map[string]any) (*Channel, error) {
	var ch Channel
	return &ch, c.Do(ctx, http.MethodPatch, "/channels/"+url.PathEscape(id), map[string]any{"settings": settings}, &ch)
}

// Schedule is one scheduled agent.
type Schedule struct {
	AgentID       string      `json:"agent_id"`
	Cron          string      `json:"cron"`
	Timezone      string      `json:"timezone"`
	Paused        bool        `json:"paused"`
	NextFireTimes []time.Time `json:"next_fire_times"`
	LastOutcome   *struct {
		At     *time.Time `json:"at"`
		Status string     `json:"status"`
		Error  string     `json:"error"`
	} `json:"last_outcome"`
}

// ScheduleList is GET /schedules.
type ScheduleList struct {
	Raw
	Schedules []Schedule `json:"schedules"`
}

// Schedules lists scheduled agents.
func (c *Client) Schedules(ctx context.Context) (*ScheduleList, error) {
	var l ScheduleList
	return &l, c.Do(ctx, http.MethodGet, "/schedules", nil, &l)
}

// MemorySession is one remembered conversation.
type MemorySession struct {
	SessionID string    `json:"session_id"`
	AgentID   string    `json:"agent_id"`
	UserID    string    `json:"user_id"`
	Username  string    `json:"username"`
	Source    string    `json:"source"`
	Messages  int64     `json:"messages"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MemoryList is GET /memory.
type MemoryList struct {
	Raw
	Sessions []MemorySession `json:"sessions"`
	Count    int             `json:"count"`
}

// Memory lists the conversations of an agent.
func (c *Client) Memory(ctx context.Context, agentID string, limit int) (*MemoryList, error) {
	q := url.Values{}
	if agentID != "" {
		q.Set("agent_id", agentID)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var l MemoryList
	return &l, c.Do(ctx, http.MethodGet, "/memory?"+q.Encode(), nil, &l)
}

// SecretMeta is a secret's name and times (never its value).
type SecretMeta struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList is GET /secrets.
type SecretList struct {
	Raw
	Secrets []SecretMeta `json:"secrets"`
}

// Secrets lists secret names.
func (c *Client) Secrets(ctx context.Context) (*SecretList, error) {
	var l SecretList
	return &l, c.Do(ctx, http.MethodGet, "/secrets", nil, &l)
}

// SetSecret stores a secret value (write-only).
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	return c.Do(ctx, http.MethodPut, "/secrets/"+url.PathEscape(name), map[string]string{"value": value}, nil)
}

// DeleteSecret removes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/secrets/"+url.PathEscape(name), nil, nil)
}

// LogLines is GET /logs.
type LogLines struct {
	Raw
	Lines []string `json:"lines"`
}

// Logs returns the newest log lines.
func (c *Client) Logs(ctx context.Context, lines int) (*LogLines, error) {
	var l LogLines
	return &l, c.Do(ctx, http.MethodGet, fmt.Sprintf("/logs?lines=%d", lines), nil, &l)
}

// AuditLog returns the last `lines` lines of the audit log (JSON objects).
func (c *Client) AuditLog(ctx context.Context, lines int) (*LogLines, error) {
	var l LogLines
	return &l, c.Do(ctx, http.MethodGet, fmt.Sprintf("/logs/audit?lines=%d", lines), nil, &l)
}

// FollowLogs prints the last `lines` lines and then each new one until ctx ends.
func (c *Client) FollowLogs(ctx context.Context, lines int, onLine func(string) error) error {
	return c.Stream(ctx, http.MethodGet, fmt.Sprintf("/logs/stream?lines=%d", lines), nil, func(ev Event) error {
		return onLine(ev.Data)
	})
}

// Diagnostic is one gateway-side check of GET /diagnostics.
type Diagnostic struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// Diagnostics is GET /diagnostics.
type Diagnostics struct {
	Raw
	Checks []Diagnostic `json:"checks"`
}

// Diagnostics runs the gateway's own checks.
func (c *Client) Diagnostics(ctx context.Context) (*Diagnostics, error) {
	var d Diagnostics
	return &d, c.Do(ctx, http.MethodGet, "/diagnostics", nil, &d)
}

// ConfigDoc is GET /config.
type ConfigDoc struct {
	Raw
	Config map[string]any `json:"config"`
	Path   string         `json:"path"`
}

// Config reads the gateway's (redacted) configuration.
func (c *Client) Config(ctx context.Context) (*ConfigDoc, error) {
	var d ConfigDoc
	return &d, c.Do(ctx, http.MethodGet, "/config", nil, &d)
}

// ReconciliationRun is a reconciliation run (GET /costs/reconciliation/runs/{run_id}).
type ReconciliationRun struct {
	Raw
	ID         string `json:"id"`
	WorkflowID string `json:"workflow_id"`
	Day        string `json:"day"`
	Trigger    string `json:"trigger"`
	Status     string `json:"status"`
	Error      string `json:"error"`
	Providers  []struct {
		Provider         string  `json:"provider"`
		Status           string  `json:"status"`
		Error            string  `json:"error"`
		Rows             int     `json:"rows"`
		Pages            int     `json:"pages"`
		ProviderCostUSD  float64 `json:"provider_cost_usd"`
		LedgerCostUSD    float64 `json:"ledger_cost_usd"`
		VarianceUSD      float64 `json:"variance_usd"`
		VarianceFraction float64 `json:"variance_fraction"`
		Alert            bool    `json:"alert"`
	} `json:"providers"`
}

// StartedReconciliation is the answer of POST /costs/reconciliation/run.
type StartedReconciliation struct {
	Raw
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Day        string `json:"day"`
	Status     string `json:"status"`
}

// StartReconciliation starts (or joins) the reconciliation of day ("" is
// the previous completed UTC day).
func (c *Client) StartReconciliation(ctx context.Context, day string) (*StartedReconciliation, error) {
	var out StartedReconciliation
	body := map[string]string{}
	if day != "" {
		body["day"] = day
	}
	return &out, c.Do(ctx, http.MethodPost, "/costs/reconciliation/run", body, &out)
}

// ReconciliationRun reads a run.
func (c *Client) ReconciliationRun(ctx context.Context, runID string) (*ReconciliationRun, error) {
	var out ReconciliationRun
	return &out, c.Do(ctx, http.MethodGet, "/costs/reconciliation/runs/"+url.PathEscape(runID), nil, &out)
}
