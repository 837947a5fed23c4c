package chat

import (
	"slices"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
)

// Overrides change one run only; the stored agent is never modified.
type Overrides struct {
	// maxlen: the API refuses longer values (api.decodeJSON).
	Provider    string   `json:"provider,omitempty" maxlen:"100"`
	Model       string   `json:"model,omitempty" maxlen:"191"`
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	MaxTurns    *int     `json:"max_turns,omitempty"`
	ToolChoice  string   `json:"tool_choice,omitempty" maxlen:"100"`
}

// hardMaxTurns bounds max_turns whatever the configuration says.
const hardMaxTurns = 50

// Settings are the effective LLM settings of one run.
type Settings struct {
	Provider    string
	Model       string
	Temperature *float64
	MaxTokens   int
	MaxTurns    int
	ToolChoice  string
	Tools       []llm.Tool
	Caching     bool
}

// Resolve applies agent configuration (tools: the agent's tool schemas,
// builtins and MCP, from Toolbox.Tools), then overrides, then the output
// ceiling. Overrides are evaluated after the agent so they can never escape
// its bounds; the workspace and agent allowlists are enforced by the cost
// controller at admission, for every surface, where a refused call also
// gets its ledger row.
func Resolve(cfg *config.Config, router *llm.Router, def *agentdef.Definition, tools []llm.Tool, ov *Overrides, who *auth.Principal) (Settings, error) {
	s := Settings{
		Provider:    def.LLM.Provider,
		Model:       def.LLM.Model,
		Temperature: def.LLM.Temperature,
		MaxTokens:   def.LLM.MaxTokens,
		MaxTurns:    def.MaxTurns,
		Tools:       tools,
	}
	if s.Provider == "" {
		s.Provider = cfg.LLM.DefaultProvider
	}
	if ov == nil {
		ov = &Overrides{}
	}
	if ov.Provider != "" || ov.Model != "" {
		if !who.Can(auth.PermOverrideModel) {
			return s, &fault.Forbidden{Code: fault.CodeForbidden, Msg: "only the admin and operator roles may choose a provider or model override"}
		}
	}
	if ov.Provider != "" {
		if _, ok := router.Provider(ov.Provider); !ok {
			return s, invalid("overrides.provider", "unknown provider %q (configured: %v)", ov.Provider, router.ProviderIDs())
		}
		if ov.Provider != s.Provider && ov.Model == "" {
			// The agent's model belongs to its own provider.
			s.Model = ""
		}
		s.Provider = ov.Provider
	}
	pc, ok := cfg.LLM.Providers[s.Provider]
	if _, routed := router.Provider(s.Provider); !ok || !routed {
		return s, invalid("llm.provider", "agent %s uses provider %q, which is not configured", def.ID, s.Provider)
	}
	if ov.Model != "" {
		if len(pc.Models) > 0 && !slices.Contains(pc.Models, ov.Model) {
			return s, invalid("overrides.model", "unknown model %q for provider %s (known: %v)", ov.Model, s.Provider, pc.Models)
		}
		s.Model = ov.Model
	}
	if s.Model == "" {
		s.Model = pc.DefaultModel
	}
	if s.Model == "" && len(pc.Models) > 0 {
		s.Model = pc.Models[0]
	}
	if s.Model == "" {
		return s, invalid("llm.model", "agent %s has no model: set llm.model on the agent or default_model on provider %s", def.ID, s.Provider)
	}
	if t := ov.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return s, invalid("overrides.temperature", "%v is outside 0..2", *t)
		}
		s.Temperature = t
	}
	if ov.MaxTokens != nil {
		if *ov.MaxTokens <= 0 {
			return s, invalid("overrides.max_tokens", "must be positive")
		}
		s.MaxTokens = *ov.MaxTokens
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = cfg.Costs.DefaultMaxOutputTokens
	}
	if ceil := cfg.Costs.MaxOutputTokensCeiling; ceil > 0 && s.MaxTokens > ceil {
		s.MaxTokens = ceil
	}
	if ov.MaxTurns != nil {
		if *ov.MaxTurns <= 0 || *ov.MaxTurns > hardMaxTurns {
			return s, invalid("overrides.max_turns", "must be between 1 and %d", hardMaxTurns)
		}
		s.MaxTurns = *ov.MaxTurns
	}
	if s.MaxTurns == 0 {
		s.MaxTurns = cfg.Runtime.MaxTurns
	}
	if s.MaxTurns <= 0 {
		s.MaxTurns = 8
	}
	switch ov.ToolChoice {
	case "", llm.ToolChoiceAuto, llm.ToolChoiceNone, llm.ToolChoiceRequired:
	default:
		if !slices.ContainsFunc(s.Tools, func(t llm.Tool) bool { return t.Name == ov.ToolChoice }) {
			return s, invalid("overrides.tool_choice", "%q is not auto, none, required or one of the agent's tools", ov.ToolChoice)
		}
	}
	if ov.ToolChoice != "" && len(s.Tools) == 0 && ov.ToolChoice != llm.ToolChoiceNone && ov.ToolChoice != llm.ToolChoiceAuto {
		return s, invalid("overrides.tool_choice", "agent %s has no tools", def.ID)
	}
	s.ToolChoice = ov.ToolChoice
	s.Caching = pc.PromptCaching
	return s, nil
}
