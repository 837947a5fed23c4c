package api

import (
	"encoding/json"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/llm"
)

// The REST operations behind the client's agent commands (create,
// enable, disable, trigger, delete: spec "Command-line client", group
// agent). Their paths are in docs/cli.md and the OpenAPI document.

// SourceTrigger is the ledger source of POST /agents/{agent_id}/trigger.
const SourceTrigger = "trigger"

// AgentAdminFeature manages agent definition files and runs an agent now:
//
//	POST   /agents                      create from a definition (YAML text or JSON object)
//	POST   /agents/reload               re-read every definition
//	POST   /agents/{agent_id}/enable    set enabled: true in its file
//	POST   /agents/{agent_id}/disable   set enabled: false in its file
//	POST   /agents/{agent_id}/trigger   run it synchronously
//	DELETE /agents/{agent_id}           remove its file (workspace agents folder only)
type AgentAdminFeature struct {
	Files *agentdef.Files
	Chat  *chat.Service
}

// Register implements Feature.
func (f *AgentAdminFeature) Register(r fiber.Router) {
	r.Post("/agents", f.create)
	r.Post("/agents/reload", f.reload)
	r.Post("/agents/:agent_id/enable", f.enable)
	r.Post("/agents/:agent_id/disable", f.disable)
	r.Post("/agents/:agent_id/trigger", f.trigger)
	r.Delete("/agents/:agent_id", f.delete)
}

// agentSingle is the spec's single form of an agent (as GET /agents/{id}).
func agentSingle(d *agentdef.Definition) agentDetail {
	item := listItem(d)
	item.LLM.MaxTokens = d.LLM.MaxTokens
	return agentDetail{agentListItem: item, SystemPrompt: d.SystemPrompt, Name: d.Name, Enabled: d.IsEnabled(),
		Trigger: d.Trigger, Schedule: d.Schedule, Webhook: d.Webhook, MaxTurns: d.MaxTurns}
}

// create accepts {"definition": "<YAML text>", "file": "<name for errors>"},
// the definition itself as a JSON object, or a YAML body
// (Content-Type application/yaml or text/yaml).
func (f *AgentAdminFeature) create(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	if err := boundDefinition(c, strings.Contains(strings.ToLower(c.Get(fiber.HeaderContentType)), "yaml")); err != nil {
		return err
	}
	text, source, err := definitionBody(c)
	if err != nil {
		return err
	}
	def, err := f.Files.Create(text, source)
	if err != nil {
		if tooMany := definitionError(err); tooMany != nil {
			return tooMany
		}
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(agentSingle(def))
}

func definitionBody(c *fiber.Ctx) ([]byte, string, error) {
	ct := strings.ToLower(c.Get(fiber.HeaderContentType))
	if strings.Contains(ct, "yaml") {
		if len(c.Body()) == 0 {
			return nil, "", badRequest("request body is empty: send the agent definition")
		}
		return append([]byte(nil), c.Body()...), "definition", nil
	}
	var probe map[string]json.RawMessage
	if err := decodeJSON(c, &probe); err != nil {
		return nil, "", err
	}
	if _, ok := probe["definition"]; ok {
		var body struct {
			Definition string `json:"definition"`
			File       string `json:"file"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return nil, "", err
		}
		if strings.TrimSpace(body.Definition) == "" {
			return nil, "", badRequest("definition: is empty (send the YAML text of the agent file)")
		}
		return []byte(body.Definition), safeSourceName(body.File), nil
	}
	text, err := agentdef.DefinitionFromJSON(c.Body())
	if err != nil {
		return nil, "", badRequest("%v", err)
	}
	return text, "definition", nil
}

// safeSourceName keeps only the base name of the client's file for error
// messages (the gateway host's paths are none of the client's business and
// vice versa).
func safeSourceName(name string) string {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" || len(name) > 200 {
		return "definition"
	}
	return name
}

func (f *AgentAdminFeature) reload(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	errs := f.Files.Registry.Reload()
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return c.JSON(fiber.Map{"agents": len(f.Files.Registry.List()), "errors": msgs})
}

func (f *AgentAdminFeature) enable(c *fiber.Ctx) error  { return f.setEnabled(c, true) }
func (f *AgentAdminFeature) disable(c *fiber.Ctx) error { return f.setEnabled(c, false) }

func (f *AgentAdminFeature) setEnabled(c *fiber.Ctx, on bool) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	def, err := f.Files.SetEnabled(c.Params("agent_id"), on)
	if err != nil {
		return err
	}
	return c.JSON(agentSingle(def))
}

func (f *AgentAdminFeature) delete(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	if err := f.Files.Delete(c.Params("agent_id")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// triggerBody asks for one synchronous run. text defaults to the agent's
// schedule.prompt; source "eval" attributes the run to evaluation (agentry
// eval), anything else is "trigger".
type triggerBody struct {
	Text     string `json:"text"`
	UserID   string `json:"user_id" maxlen:"191"`
	Username string `json:"username" maxlen:"191"`
	Source   string `json:"source" maxlen:"32"`
}

// triggerReply is the chat response plus the run's token usage, which the
// client's eval report sums up.
type triggerReply struct {
	*chat.Reply
	Usage triggerUsage `json:"usage"`
}

type triggerUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
}

func (f *AgentAdminFeature) trigger(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var b triggerBody
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &b); err != nil {
			return err
		}
	}
	id := c.Params("agent_id")
	if strings.TrimSpace(b.Text) == "" {
		if def, ok := f.Files.Registry.Get(id); ok && def.Schedule != nil && def.Schedule.Prompt != "" {
			b.Text = def.Schedule.Prompt
		}
	}
	source := SourceTrigger
	if b.Source == llm.SourceEval {
		source = llm.SourceEval
	} else if b.Source != "" && b.Source != SourceTrigger {
		return badRequest("source: unknown value %q (use trigger or eval)", b.Source)
	}
	if b.UserID == "" {
		b.UserID = source + "-user"
	}
	reply, err := f.Chat.Chat(c.UserContext(), chat.Request{AgentID: id, Text: b.Text, UserID: b.UserID, Username: b.Username, Source: source}, nil)
	if err != nil {
		return err
	}
	return c.JSON(triggerReply{Reply: reply, Usage: triggerUsage{InputTokens: reply.Usage.InputTokens, OutputTokens: reply.Usage.OutputTokens, CachedInputTokens: reply.Usage.CachedInputTokens}})
}
