package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/approvals"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

// ApprovalsFeature lists the tool approvals durable runs wait for and
// takes people's decisions (docs/approvals.md).
type ApprovalsFeature struct {
	Approvals *approvals.Service
	Store     models.ApprovalStore
}

// Register implements Feature.
func (f *ApprovalsFeature) Register(r fiber.Router) {
	r.Get("/approvals", f.list)
	r.Get("/approvals/:id", f.get)
	r.Post("/approvals/:id", f.decide)
}

func (f *ApprovalsFeature) list(c *fiber.Ctx) error {
	p, err := page(c)
	if err != nil {
		return err
	}
	filter := models.ApprovalFilter{Status: c.Query("status"), AgentID: c.Query("agent_id"), Schedule: c.Query("schedule"), Page: p}
	for name, dst := range map[string]*int64{"task_id": &filter.TaskID, "run_id": &filter.RunID} {
		if raw := c.Query(name); raw != "" {
			n, ok := parseID(raw)
			if !ok {
				return badRequest("%s %q is not an id", name, raw)
			}
			*dst = n
		}
	}
	rows, next, err := f.Store.ListApprovals(c.UserContext(), filter)
	if err != nil {
		return err
	}
	return c.JSON(withCursor(fiber.Map{"approvals": rows}, next))
}

func (f *ApprovalsFeature) get(c *fiber.Ctx) error {
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	a, err := f.Store.GetApproval(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(a)
}

type decisionRequest struct {
	Decision string `json:"decision"`
	Comment  string `json:"comment"`
}

func (f *ApprovalsFeature) decide(c *fiber.Ctx) error {
	p := Principal(c)
	if p == nil || (p.Role != auth.RoleAdmin && p.Role != auth.RoleOperator) {
		return &Error{Status: fiber.StatusForbidden, Message: "deciding an approval needs the admin or operator role", Code: "forbidden"}
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	var req decisionRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if f.Approvals == nil {
		return fault.TemporalUnavailable("approvals are not available (no Temporal client)")
	}
	a, err := f.Approvals.Decide(c.UserContext(), id, req.Decision, p.Subject, req.Comment)
	if err != nil {
		return err
	}
	return c.JSON(a)
}
