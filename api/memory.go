package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/memory"
	"github.com/agentryhq/agentry/models"
)

// The REST operations behind the client's `memory` commands (spec
// "Command-line client", group state; docs/memory.md).

// MemoryFeature lists the conversations the gateway remembers and the
// memories of agents with memory:
//
//	GET    /memory?agent_id=<id>&limit=<n>                  sessions (memory:read)
//	GET    /memory/entries?agent_id=&subject=&user_id=&kind=&limit=
//	POST   /memory/entries {agent_id, text, user_id?}       (write)
//	GET    /memory/entries/{id}
//	DELETE /memory/entries/{id}                             (write)
//
// A caller reads and deletes the memories of its own subject (every end
// user it named); another subject's need memory:read.
type MemoryFeature struct {
	Store  models.ChatStore
	Memory *memory.Service
}

// Register implements Feature.
func (f *MemoryFeature) Register(r fiber.Router) {
	r.Get("/memory", f.list)
	r.Get("/memory/entries", f.entries)
	r.Post("/memory/entries", f.create)
	r.Get("/memory/entries/:id", f.get)
	r.Delete("/memory/entries/:id", f.remove)
}

func (f *MemoryFeature) list(c *fiber.Ctx) error {
	if err := Require(c, auth.PermMemoryRead); err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 50, 1, 1000)
	if err != nil {
		return err
	}
	sessions, err := f.Store.ListSessionSummaries(c.UserContext(), c.Query("agent_id"), limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"sessions": sessions, "count": len(sessions)})
}

func (f *MemoryFeature) service() (*memory.Service, error) {
	if f.Memory == nil {
		return nil, fault.NotEnabled("memory is not enabled on this gateway")
	}
	return f.Memory, nil
}

// callerSubject is the caller's subject ("" without a principal, which
// every check below then refuses).
func callerSubject(c *fiber.Ctx) string {
	if p := Principal(c); p != nil {
		return p.Subject
	}
	return ""
}

// mayReadMemory: the caller's own subject, or memory:read.
func mayReadMemory(c *fiber.Ctx, subject string) error {
	if p := Principal(c); p != nil && subject != "" && p.Subject == subject {
		return nil
	}
	return Require(c, auth.PermMemoryRead)
}

func (f *MemoryFeature) entries(c *fiber.Ctx) error {
	svc, err := f.service()
	if err != nil {
		return err
	}
	agentID := c.Query("agent_id")
	if agentID == "" {
		return badRequest("agent_id is required")
	}
	limit, err := queryInt(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	subject := callerSubject(c)
	if q, ok := c.Queries()["subject"]; ok {
		subject = q // "" is every subject (memory:read)
	}
	if err := mayReadMemory(c, subject); err != nil {
		return err
	}
	kind := c.Query("kind")
	if kind != "" && kind != models.MemoryFact && kind != models.MemoryArchive {
		return badRequest("kind must be %s or %s, got %q", models.MemoryFact, models.MemoryArchive, kind)
	}
	_, userGiven := c.Queries()["user_id"]
	list, err := svc.List(c.UserContext(), memory.Filter{AgentID: agentID, Subject: subject, UserID: memory.UserOf(c.Query("user_id")),
		AnyUser: !userGiven, Kind: kind, Limit: limit})
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"memories": list, "count": len(list)})
}

func (f *MemoryFeature) create(c *fiber.Ctx) error {
	svc, err := f.service()
	if err != nil {
		return err
	}
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var b struct {
		AgentID string `json:"agent_id"`
		UserID  string `json:"user_id"`
		Text    string `json:"text"`
	}
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	if b.AgentID == "" {
		return badRequest("agent_id is required")
	}
	e, err := svc.Write(c.UserContext(), agent.MemoryScope{AgentID: b.AgentID, Subject: callerSubject(c),
		UserID: memory.UserOf(b.UserID), Source: "api"}, b.Text)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(e)
}

// entry is the memory {id} when the caller may see it; another subject's
// is not found for a caller without memory:read.
func (f *MemoryFeature) entry(c *fiber.Ctx) (*memory.Service, *models.MemoryEntry, error) {
	svc, err := f.service()
	if err != nil {
		return nil, nil, err
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return nil, nil, err
	}
	e, err := svc.Get(c.UserContext(), id)
	if err != nil {
		return nil, nil, err
	}
	if err := mayReadMemory(c, e.Subject); err != nil {
		return nil, nil, memory.ErrNotFound
	}
	return svc, e, nil
}

func (f *MemoryFeature) get(c *fiber.Ctx) error {
	_, e, err := f.entry(c)
	if err != nil {
		return err
	}
	return c.JSON(e)
}

func (f *MemoryFeature) remove(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	svc, e, err := f.entry(c)
	if err != nil {
		return err
	}
	if err := svc.Delete(c.UserContext(), e.ID); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
