package api

import (
	"fmt"
	"time"

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
