package api

import (
	"errors"
	"fmt"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/gofiber/fiber/v2"
)

// maxDefinitionBytes bounds the body of POST /agents: a definition with a
// long system prompt is a few KiB; 256 KiB keeps YAML parsing (linear,
// about 6 µs a key) well under 150 ms whatever the body holds.
const maxDefinitionBytes = 256 << 10

// boundDefinition refuses, before any parsing, a definition body over
// maxDefinitionBytes or (JSON) over agentdef.MaxKeys keys: decoding a YAML
// mapping into the definition is quadratic in its keys, so 100,000 keys
// (1.4 MB) cost 85 s of CPU (#42). YAML text (a YAML body or the
// "definition" field) is bounded by key count in agentdef.Parse, after a
// linear parse and before the decode.
func boundDefinition(c *fiber.Ctx, yamlBody bool) error {
	body := c.Body()
	if len(body) > maxDefinitionBytes {
		return Errf(fiber.StatusRequestEntityTooLarge, "agent definition is %d bytes, over the limit of %d", len(body), maxDefinitionBytes).
			WithCode("too_large").With("limit", "definition bytes").With("max", maxDefinitionBytes)
	}
	if yamlBody {
		return nil
	}
	// Two keys of the {"definition": ..., "file": ...} form on top.
	return boundJSON(body, agentdef.MaxKeys+2)
}

// definitionError is the answer for an agent definition Parse refused
// for its key count (a 413 naming the limit) or nil.
func definitionError(err error) error {
	var tk *agentdef.TooManyKeysError
	if !errors.As(err, &tk) {
		return nil
	}
	return Errf(fiber.StatusRequestEntityTooLarge, "%s", fmt.Sprint(tk)).WithCode("too_large").
		With("limit", "definition keys").With("max", agentdef.MaxKeys)
}

// AgentsFeature serves GET /agents and GET /agents/{agent_id}.
type AgentsFeature struct {
	Agents *agentdef.Registry
}

// Register implements Feature.
func (f *AgentsFeature) Register(r fiber.Router) {
	r.Get("/agents", f.list)
	r.Get("/agents/:agent_id", f.get)
}

// agentListItem is the list form of the spec's Agent table.
type agentListItem struct {
	ID          string      `json:"id"`
	Description string      `json:"description"`
	LLM         agentLLMRef `json:"llm"`
	Channels    []string    `json:"channels"`
	Builtins    []string    `json:"builtins"`
}

type agentLLMRef struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens,omitempty"`
}

// agentDetail is the single form: the list form plus llm.max_tokens and
// system_prompt, and the fields a client needs to drive the agent.
type agentDetail struct {
	agentListItem
	SystemPrompt string                   `json:"system_prompt"`
	Name         string                   `json:"name,omitempty"`
	Enabled      bool                     `json:"enabled"`
	Trigger      string                   `json:"trigger,omitempty"`
	Schedule     *agentdef.Schedule       `json:"schedule,omitempty"`
	Webhook      *agentdef.WebhookMapping `json:"webhook,omitempty"`
	MaxTurns     int                      `json:"max_turns,omitempty"`
}

func listItem(d *agentdef.Definition) agentListItem {
	nz := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return agentListItem{ID: d.ID, Description: d.Description, LLM: agentLLMRef{Provider: d.LLM.Provider, Model: d.LLM.Model},
		Channels: nz(d.Channels), Builtins: nz(d.Builtins)}
}

func (f *AgentsFeature) list(c *fiber.Ctx) error {
	defs := f.Agents.List()
	items := make([]agentListItem, 0, len(defs))
	for _, d := range defs {
		items = append(items, listItem(d))
	}
	return c.JSON(fiber.Map{"agents": items})
}

func (f *AgentsFeature) get(c *fiber.Ctx) error {
	d, ok := f.Agents.Get(c.Params("agent_id"))
	if !ok {
		return notFound("agent %q not found", c.Params("agent_id"))
	}
	item := listItem(d)
	item.LLM.MaxTokens = d.LLM.MaxTokens
	return c.JSON(agentDetail{agentListItem: item, SystemPrompt: d.SystemPrompt, Name: d.Name, Enabled: d.IsEnabled(),
		Trigger: d.Trigger, Schedule: d.Schedule, Webhook: d.Webhook, MaxTurns: d.MaxTurns})
}
