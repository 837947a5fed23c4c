package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/models"
)

// The REST operation behind the client's `memory list` (spec
// "Command-line client", group state).

// MemoryFeature lists the conversations the gateway remembers:
//
//	GET /memory?agent_id=<id>&limit=<n>   (memory:read)
type MemoryFeature struct {
	Store models.ChatStore
}

// Register implements Feature.
func (f *MemoryFeature) Register(r fiber.Router) { r.Get("/memory", f.list) }

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
