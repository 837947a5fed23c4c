package api

import (
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
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
	Store  *models.Store
	Logger interface {
		Warn(msg string, args ...any)
	}
}

// Register implements Feature.
func (f *ReconciliationFeature) Register(r fiber.Router) {
	r.Post("/costs/reconciliation/run", f.run)
	r.Get("/costs/reconciliation/runs/:run_id", f.get)
}

// MapError implements Feature.
func (f *ReconciliationFeature) MapError(err error) *Error {
	switch {
	case errors.Is(err, reconcile.ErrInvalidDay):
		return &Error{Status: fiber.StatusBadRequest, Message: strings.TrimPrefix(err.Error(), reconcile.ErrInvalidDay.Error()+": "),
			Code: "invalid", Fields: map[string]any{"field": "day"}}
	case errors.Is(err, reconcile.ErrNotConfigured):
		return &Error{Status: fiber.StatusConflict, Message: err.Error() + "; add one (type, base_url, api_key_env) to run reconciliation",
			Code: "not_configured"}
	}
	return nil
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
		return &Error{Status: fiber.StatusServiceUnavailable, Message: "reconciliation is not available (no Temporal client)", Code: "temporal_unavailable", RetryAfter: 5 * time.Second}
	}
	run, err := f.Runner.RunNow(c.UserContext(), strings.TrimSpace(req.Day), time.Now())
	if err != nil {
		if errors.Is(err, reconcile.ErrInvalidDay) || errors.Is(err, reconcile.ErrNotConfigured) {
			return err
		}
		if f.Logger != nil {
			f.Logger.Warn("reconciliation: start failed", "err", err)
		}
		return &Error{Status: fiber.StatusServiceUnavailable, Message: "the workflow engine (Temporal) is unavailable; try again shortly", Code: "temporal_unavailable", RetryAfter: 5 * time.Second}
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
