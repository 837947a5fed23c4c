package api

import (
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/reconcile"
	"github.com/agentryhq/agentry/models"
)

// ReconciliationFeature serves POST /costs/reconciliation/run (start the
// Reconcile workflow for a day) and GET /costs/reconciliation/runs/{run_id}
// (a run's progress, totals and variance). Reading needs what the cost
// status needs; starting a run needs the admin or operator role (it calls
// the providers' admin APIs).
type ReconciliationFeature struct {
	Runner *reconcile.Scheduler
	Store  models.ReconcileStore
	Logger interface {
		Warn(msg string, args ...any)
	}
}

// Register implements Feature.
func (f *ReconciliationFeature) Register(r fiber.Router) {
	r.Post("/costs/reconciliation/run", f.run)
	r.Get("/costs/reconciliation/runs/:run_id", f.get)
}

type reconcileRunRequest struct {
	Day string `json:"day"`
}

func (f *ReconciliationFeature) run(c *fiber.Ctx) error {
	p := Principal(c)
	if p == nil || (p.Role != auth.RoleAdmin && p.Role != auth.RoleOperator) {
		return &Error{Status: fiber.StatusForbidden, Message: "the admin or operator role is required", Code: "forbidden"}
	}
	var req reconcileRunRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	if f.Runner == nil || f.Runner.Client == nil {
		return fault.TemporalUnavailable("reconciliation is not available (no Temporal client)")
	}
	run, err := f.Runner.RunNow(c.UserContext(), strings.TrimSpace(req.Day), time.Now())
	if err != nil {
		if _, ok := fault.As(err); ok {
			return err // a bad day, no provider
		}
		if f.Logger != nil {
			f.Logger.Warn("reconciliation: start failed", "err", err)
		}
		return fault.ErrTemporalUnavailable
	}
	return c.Status(fiber.StatusAccepted).JSON(run)
}

func (f *ReconciliationFeature) get(c *fiber.Ctx) error {
	if err := requireCostReader(c); err != nil {
		return err
	}
	run, err := f.Store.GetReconciliationRun(c.UserContext(), c.Params("run_id"))
	if errors.Is(err, models.ErrNotFound) {
		return notFound("reconciliation run %q not found", c.Params("run_id"))
	}
	if err != nil {
		return err
	}
	return c.JSON(run)
}
