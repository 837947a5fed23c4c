// Package llm holds the clients of the LLM providers Agentry talks to (OpenAI-compatible chat
// completions, Anthropic Messages, Ollama), the retry policy shared by all of them, and the Router:
// the single call site every surface (chat, stream, webhook, task runs, schedules, evals, builder)
// goes through, so that cost governance can admit and settle every inference in one place.
//
// The clients speak the providers' wire formats with net/http and encoding/json only. They never
// retry on their own: retries live in WithRetry, which NewProvider applies once per provider.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Tool choices besides a tool name.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
)

// Provider wire protocols (ProviderConfig.Type).
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeOllama    = "ollama"
)

// Default base URLs, used when ProviderConfig.BaseURL is empty.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	DefaultOllamaBaseURL    = "http://127.0.0.1:11434"
)

// DefaultTimeout bounds one attempt of a non-streaming call, and for a stream the wait for the
// response headers and for each following chunk, when ProviderConfig.Timeout is zero. It is generous
// because a local runtime may first have to load the model.
const DefaultTimeout = 5 * time.Minute

// DefaultAnthropicMaxTokens is sent when Request.MaxTokens is zero: the Messages API requires
// max_tokens, the other APIs fall back to the model's own limit.
const DefaultAnthropicMaxTokens = 4096

// Message is one entry of a conversation.
type Message struct {
	Role    string // system | user | assistant | tool
	Content string
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string
	// Name is the tool name on a tool message (Ollama wants it as tool_name). Other wire formats
	// ignore it: OpenAI restricts names to [a-zA-Z0-9_-], which display names rarely are.
	Name string
}

// ToolCall is one call of a tool requested by the model.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage // a JSON object; "{}" when the model gave none
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the arguments object
}

// Request is one provider-neutral inference request.
type Request struct {
	Model    string
	Messages []Message
	Tools    []Tool
	// ToolChoice is "", "auto", "none", "required" or the name of one tool. It is not sent when
	// Tools is empty (the providers reject a choice without tools). Ollama has no tool_choice:
	// "none" drops the tools, the other values are left to the model.
	ToolChoice  string
	Temperature *float64
	// MaxTokens caps the output; 0 leaves it to the provider (Anthropic: DefaultAnthropicMaxTokens).
	MaxTokens int
	// PromptCaching asks for provider cache controls (Anthropic cache_control on the system prompt).
	// Governance may turn it off for data classes that must not be cached.
	PromptCaching bool
	// Input, when not empty, makes the request an embedding request (embed.go): the texts are
	// embedded (EmbeddingProvider), one vector per text in Response.Embeddings; Messages, Tools and
	// MaxTokens are not used and governance allows no output tokens.
	Input []string
	// ReserveInputTokens, when positive, is input the admission counts
	// besides the messages: what a realtime voice session may take in audio,
	// which no message text tells (internal/voice). Providers never see it.
	ReserveInputTokens int64
	// Dimensions asks an embedding model that supports it (OpenAI's text-embedding-3) for vectors
	// of that length; 0 leaves the model's own.
	Dimensions int
}

// IsEmbedding reports whether r is an embedding request (Input set).
func (r *Request) IsEmbedding() bool { return len(r.Input) > 0 }

// Usage is the token usage of one call, normalised across providers:
//   - InputTokens counts every prompt token, including those read from or written to a cache
//     (the OpenAI convention; Anthropic's three input counters are summed).
//   - CachedInputTokens and CacheCreationTokens are the parts of InputTokens read from / written to
//     the provider's prompt cache.
//   - OutputTokens counts every generated token, including ReasoningTokens.
//   - ToolUsePromptTokens is reported by none of the three wire formats today; it stays 0.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CachedInputTokens   int64
	CacheCreationTokens int64
	ReasoningTokens     int64
	ToolUsePromptTokens int64
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:         u.InputTokens + o.InputTokens,
		OutputTokens:        u.OutputTokens + o.OutputTokens,
		CachedInputTokens:   u.CachedInputTokens + o.CachedInputTokens,
		CacheCreationTokens: u.CacheCreationTokens + o.CacheCreationTokens,
		ReasoningTokens:     u.ReasoningTokens + o.ReasoningTokens,
		ToolUsePromptTokens: u.ToolUsePromptTokens + o.ToolUsePromptTokens,
	}
}

// Response is the outcome of one call.
type Response struct {
	Content   string
	ToolCalls []ToolCall
	Usage     Usage
	// UsageReported is true when the provider reported the usage of the call. When false (a stream
	// without a usage event, a cut-off stream), Usage may still hold what arrived before the cut
	// (Anthropic reports input tokens first); treat it as a lower bound and estimate the rest.
	UsageReported bool
	// RequestID is the provider's id of the request (x-request-id / request-id header, otherwise the
	// response id); empty when the provider has none (Ollama).
	RequestID string
	// Model is the model that answered, as reported by the provider (may carry a version suffix).
	Model string
	// FinishReason is the provider's stop reason as sent (stop, length, tool_calls, end_turn,
	// tool_use, max_tokens, ...).
	FinishReason string
	// Attempts is the number of provider requests made for this call (1 without retries).
	Attempts int
	// Embeddings are the vectors of an embedding request, one per Request.Input text, in order.
	Embeddings [][]float32
}

// Provider is one configured LLM endpoint.
type Provider interface {
	// ID is the provider's config id, e.g. "ollama", "openai", "anthropic", "local-vllm".
	ID() string
	// Address is the base URL, used in error messages.
	Address() string
	// Chat sends one non-streaming request.
	Chat(ctx context.Context, req Request) (*Response, error)
	// Stream calls onDelta for each text chunk as it arrives and returns the final Response (usage
	// from the provider when reported; UsageReported=false otherwise). On a cut-off stream it returns
	// the partial Response (content so far) AND an error. An error returned by onDelta ends the
	// stream and is returned (wrapped).
	Stream(ctx context.Context, req Request, onDelta func(text string) error) (*Response, error)
}

// ProviderConfig configures one provider.
type ProviderConfig struct {
	// Type is the wire protocol: openai (any OpenAI-compatible server), anthropic or ollama. When
	// empty, a provider id equal to one of these names selects that type.
	Type string
	// BaseURL is the API root: http://host/v1 for OpenAI-compatible servers, https://api.anthropic.com
	// for Anthropic (a trailing /v1 is tolerated), http://host:11434 for Ollama. Empty: the default of
	// the type.
	BaseURL string
	// APIKey is sent as Authorization: Bearer (OpenAI, Ollama behind a proxy) or x-api-key
	// (Anthropic). It never appears in errors or logs.
	APIKey string
	// Timeout bounds one attempt (see DefaultTimeout); 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt: 0 means the default
	// (DefaultRetryPolicy), a negative value disables retries.
	MaxRetries int
	// Headers are extra headers sent with every request (e.g. OpenAI-Organization, HTTP-Referer).
	Headers map[string]string
}

// NewProvider builds the client of one configured provider, wrapped with the retry policy of cfg
// (see WithRetry). An unknown type is an error naming it.
func NewProvider(id string, cfg ProviderConfig) (Provider, error) {
	if strings.TrimSpace(id) == "" {
		return nil, fmt.Errorf("llm provider: id is required")
	}
	typ := strings.ToLower(strings.TrimSpace(cfg.Type))
	if typ == "" {
		switch id {
		case TypeOpenAI, TypeAnthropic, TypeOllama:
			typ = id
		default:
			return nil, fmt.Errorf("llm provider %q: type is required (openai, anthropic or ollama)", id)
		}
	}
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		switch typ {
		case TypeOpenAI:
			base = DefaultOpenAIBaseURL
		case TypeAnthropic:
			base = DefaultAnthropicBaseURL
		case TypeOllama:
			base = DefaultOllamaBaseURL
		}
	}
	base = strings.TrimRight(base, "/")
	if base != "" {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("llm provider %q: base_url %q is not an http(s) URL", id, cfg.BaseURL)
		}
		if u.User != nil {
			// Credentials in the URL would leak into every error message.
			return nil, fmt.Errorf("llm provider %q: base_url must not carry credentials; use api_key", id)
		}
	}
	h := newHTTPBase(id, typ, base, cfg)
	var p Provider
	switch typ {
	case TypeOpenAI:
		p = &openAIClient{httpBase: h}
	case TypeAnthropic:
		h.base = strings.TrimSuffix(base, "/v1")
		p = &anthropicClient{httpBase: h}
	case TypeOllama:
		p = &ollamaClient{httpBase: h}
	default:
		return nil, fmt.Errorf("llm provider %q: unknown type %q (want openai, anthropic or ollama)", id, cfg.Type)
	}
	return WithRetry(p, RetryPolicyFromMaxRetries(cfg.MaxRetries)), nil
}
