package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/logbuf"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/models"
)

// The REST operations behind the client's agent, state, secret, log and
// doctor commands (the spec names the commands, not the paths; the paths
// are in docs/cli.md and the OpenAPI document).

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
	Files *agent.Files
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
func agentSingle(d *agent.Definition) agentDetail {
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
	text, source, err := definitionBody(c)
	if err != nil {
		return err
	}
	def, err := f.Files.Create(text, source)
	if err != nil {
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
	text, err := agent.DefinitionFromJSON(c.Body())
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

// MemoryFeature lists the conversations the gateway remembers:
//
//	GET /memory?agent_id=<id>&limit=<n>   (memory:read)
type MemoryFeature struct {
	Store *models.Store
}

// Register implements Feature.
func (f *MemoryFeature) Register(r fiber.Router) { r.Get("/memory", f.list) }

type memorySession struct {
	SessionID string    `json:"session_id"`
	AgentID   string    `json:"agent_id"`
	UserID    string    `json:"user_id"`
	Username  string    `json:"username"`
	Source    string    `json:"source"`
	Messages  int64     `json:"messages"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (f *MemoryFeature) list(c *fiber.Ctx) error {
	if err := Require(c, auth.PermMemoryRead); err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 50, 1, 1000)
	if err != nil {
		return err
	}
	q := f.Store.DB.WithContext(c.UserContext()).Table("chat_sessions AS s").
		Select("s.id AS session_id, s.agent_id, s.user_id, s.username, s.source, s.updated_at, " +
			"(SELECT COUNT(*) FROM chat_messages m WHERE " + f.Store.SessionMessagesJoin() + ") AS messages").
		Order("s.updated_at DESC, s.id").Limit(limit)
	if id := c.Query("agent_id"); id != "" {
		q = q.Where("s.agent_id = ?", id)
	}
	sessions := []memorySession{}
	if err := q.Scan(&sessions).Error; err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	return c.JSON(fiber.Map{"sessions": sessions, "count": len(sessions)})
}

// SecretsFeature is the write-only secret store (admin only):
//
//	PUT    /secrets/{name}  {"value": "..."}  204
//	GET    /secrets         names and times, never values
//	DELETE /secrets/{name}  204
type SecretsFeature struct {
	Secrets *secrets.Store
}

// Register implements Feature.
func (f *SecretsFeature) Register(r fiber.Router) {
	r.Get("/secrets", f.list)
	r.Put("/secrets/:name", f.set)
	r.Delete("/secrets/:name", f.delete)
}

func (f *SecretsFeature) list(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	list, err := f.Secrets.List(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"secrets": list})
}

func (f *SecretsFeature) set(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	var b struct {
		Value *string `json:"value"`
	}
	if !utf8.Valid(c.Body()) {
		return badRequest("request body is not valid UTF-8") // a secret stored as sent, or not at all
	}
	if err := json.Unmarshal(c.Body(), &b); err != nil || b.Value == nil {
		// Never echo the body: it is the secret.
		return badRequest(`request body must be {"value": "<secret>"}`)
	}
	if err := f.Secrets.Set(c.UserContext(), c.Params("name"), *b.Value); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (f *SecretsFeature) delete(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	if err := f.Secrets.Delete(c.UserContext(), c.Params("name")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// LogsFeature serves the gateway's recent log lines (admin only):
//
//	GET /logs?lines=200           {"lines": [...]}
//	GET /logs/stream?lines=<n>    SSE: the last n lines, then each new line as it is logged
type LogsFeature struct {
	Logs *logbuf.Buffer
}

// LogPingInterval is how often an idle log stream sends an SSE comment, so
// that a client that went away is noticed.
var LogPingInterval = 5 * time.Second

// Register implements Feature.
func (f *LogsFeature) Register(r fiber.Router) {
	r.Get("/logs", f.recent)
	r.Get("/logs/stream", f.stream)
}

func (f *LogsFeature) recent(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	n, err := queryInt(c, "lines", 200, 1, 100000)
	if err != nil {
		return err
	}
	lines := f.Logs.Tail(n)
	if lines == nil {
		lines = []string{}
	}
	return c.JSON(fiber.Map{"lines": lines})
}

func (f *LogsFeature) stream(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	n, err := queryInt(c, "lines", 0, 0, 100000)
	if err != nil {
		return err
	}
	tail, sub := f.Logs.Follow(n)
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer sub.Cancel()
		for _, l := range tail {
			writeData(w, l)
		}
		if w.Flush() != nil {
			return
		}
		ping := time.NewTicker(LogPingInterval)
		defer ping.Stop()
		for {
			select {
			case l, ok := <-sub.Lines():
				if !ok {
					return
				}
				writeData(w, l)
			case <-ping.C:
				w.WriteString(": ping\n\n")
			}
			if w.Flush() != nil {
				return // the client went away
			}
		}
	})
	return nil
}

// DiagnosticsFeature answers what only the gateway can check for `agentry
// doctor`:
//
//	GET /diagnostics   {"checks": [{"name", "status": "ok"|"fail", "detail"}]}
//
// Today: whether the default LLM provider answers at its base URL (any
// HTTP answer counts; no inference is made, nothing is billed).
type DiagnosticsFeature struct {
	Router *llm.Router
	// HTTP is the client used for the reachability probe.
	HTTP *http.Client
}

// Register implements Feature.
func (f *DiagnosticsFeature) Register(r fiber.Router) { r.Get("/diagnostics", f.diagnostics) }

type diagnosticCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

func (f *DiagnosticsFeature) diagnostics(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 5*time.Second)
	defer cancel()
	return c.JSON(fiber.Map{"checks": []diagnosticCheck{f.defaultProvider(ctx)}})
}

func (f *DiagnosticsFeature) defaultProvider(ctx context.Context) diagnosticCheck {
	chk := diagnosticCheck{Name: "default_provider"}
	id := f.Router.DefaultProvider()
	p, ok := f.Router.Provider(id)
	if !ok {
		chk.Status, chk.Detail = "fail", fmt.Sprintf("default provider %q is not configured", id)
		return chk
	}
	client := f.HTTP
	if client == nil {
		client = &http.Client{Timeout: 3 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Address(), nil)
	if err != nil {
		chk.Status, chk.Detail = "fail", fmt.Sprintf("provider %s: bad base URL %q", id, p.Address())
		return chk
	}
	resp, err := client.Do(req)
	if err != nil {
		chk.Status, chk.Detail = "fail", fmt.Sprintf("provider %s at %s is not reachable: %v", id, p.Address(), rootErr(err))
		return chk
	}
	resp.Body.Close()
	chk.Status, chk.Detail = "ok", fmt.Sprintf("provider %s answers at %s (HTTP %d)", id, p.Address(), resp.StatusCode)
	return chk
}

func rootErr(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
