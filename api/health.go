package api

import (
	"context"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
)

// Health has three doors (docs/operations.md, "Health"):
//
//   - GET /health/live — liveness: the process answers and its
//     dependencies (Deps.Health: database writable, Temporal reachable)
//     are up. 503 "degraded" when one fails.
//   - GET /health/ready — readiness: liveness plus the alerting checks
//     (Deps.Warnings, e.g. costs). A failing warning check shows as "error"
//     with severity "warning" and makes the status "warn", but the answer
//     stays 200:
//     accounting attribution below 100 % after a crash or a full disk must
//     alert (spec cost rule 13), not take a healthy gateway out of service
//     for the rest of the UTC day (#42).
//   - GET /health — the same as /health/ready, the shape it always had.
//
// A warning clears by itself when its check passes again (attribution back
// at 100 % after reconciliation or a late settlement, or a new UTC day). An
// operator who has seen it acknowledges it with POST
// /api/v1/health/checks/{name}/acknowledge (admin): the check still shows
// "error" with its text, now with acknowledged_at and acknowledged_by, and
// no longer makes the status "warn", until its error text changes (new
// unattributed calls) or the gateway restarts.
//
// A check's status stays ok or error as before; severity says whether an
// error takes the gateway out of service ("critical") or alerts
// ("warning"), so clients that read only status still see the problem.

// healthTimeout bounds one health answer (every check shares it).
const healthTimeout = 5 * time.Second

// Severities of a check.
const (
	severityCritical = "critical"
	severityWarning  = "warning"
)

// checkResult is one check's entry in a health answer.
type checkResult struct {
	Status         string     `json:"status"`   // ok | error
	Severity       string     `json:"severity"` // critical | warning
	Error          string     `json:"error,omitempty"`
	AcknowledgedAt *time.Time `json:"acknowledged_at,omitempty"`
	AcknowledgedBy string     `json:"acknowledged_by,omitempty"`
	// Detail says what a check found when that is worth reading even when
	// ok (sandbox: the isolation in force). Deps.Details.
	Detail string `json:"detail,omitempty"`
}

// acks are the warnings acknowledged by an operator: check name to the
// error text acknowledged (a different text is a new warning).
type acks struct {
	mu sync.Mutex
	m  map[string]ack
}

type ack struct {
	problem string
	at      time.Time
	by      string
}

func (a *acks) get(name string) (ack, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[name]
	return v, ok
}

func (a *acks) set(name string, v ack) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]ack{}
	}
	a.m[name] = v
}

func (a *acks) drop(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, name)
}

// runChecks runs the dependency checks, and the warning checks when
// withWarnings, and returns the answer's status, HTTP code and entries.
func (s *Server) runChecks(ctx context.Context, withWarnings bool) (string, int, map[string]checkResult) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	checks := map[string]checkResult{}
	failed, warned := false, false
	for name, check := range s.deps.Health {
		if err := check(ctx); err != nil {
			failed = true
			checks[name] = checkResult{Status: "error", Severity: severityCritical, Error: err.Error()}
		} else {
			checks[name] = checkResult{Status: "ok", Severity: severityCritical}
		}
	}
	if withWarnings {
		for name, check := range s.deps.Warnings {
			err := check(ctx)
			if err == nil {
				s.acks.drop(name) // cleared: a later problem is a new warning
				checks[name] = checkResult{Status: "ok", Severity: severityWarning}
				continue
			}
			r := checkResult{Status: "error", Severity: severityWarning, Error: err.Error()}
			if a, ok := s.acks.get(name); ok && a.problem == r.Error {
				at := a.at
				r.AcknowledgedAt, r.AcknowledgedBy = &at, a.by
			} else {
				warned = true
			}
			checks[name] = r
		}
	}
	for name, detail := range s.deps.Details {
		if r, ok := checks[name]; ok {
			r.Detail = detail()
			checks[name] = r
		}
	}
	switch {
	case failed:
		return "degraded", fiber.StatusServiceUnavailable, checks
	case warned:
		return "warn", fiber.StatusOK, checks
	}
	return "ok", fiber.StatusOK, checks
}

// health answers GET /health and GET /health/ready.
func (s *Server) health(c *fiber.Ctx) error {
	status, code, checks := s.runChecks(c.UserContext(), true)
	return c.Status(code).JSON(fiber.Map{"status": status, "version": s.deps.Version, "checks": checks})
}

// live answers GET /health/live: the dependency checks only.
func (s *Server) live(c *fiber.Ctx) error {
	status, code, checks := s.runChecks(c.UserContext(), false)
	return c.Status(code).JSON(fiber.Map{"status": status, "version": s.deps.Version, "checks": checks})
}

// acknowledge answers POST /api/v1/health/checks/{name}/acknowledge
// (admin): the warning check's current problem is acknowledged. 404 for a
// name that is not a warning check; 409 when it has no problem to
// acknowledge.
func (s *Server) acknowledge(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	name := c.Params("name")
	check, ok := s.deps.Warnings[name]
	if !ok {
		return Errf(fiber.StatusNotFound, "no warning check %q (only alerting checks, not dependencies, can be acknowledged)", name).WithCode("not_found")
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), healthTimeout)
	defer cancel()
	err := check(ctx)
	if err == nil {
		return Errf(fiber.StatusConflict, "check %q has no problem to acknowledge", name).WithCode("nothing_to_acknowledge")
	}
	by := ""
	if p := Principal(c); p != nil {
		by = p.Subject
	}
	at := time.Now().UTC().Truncate(time.Second)
	s.acks.set(name, ack{problem: err.Error(), at: at, by: by})
	s.log.Info("health warning acknowledged", "check", name, "by", by)
	return c.JSON(checkResult{Status: "error", Severity: severityWarning, Error: err.Error(), AcknowledgedAt: &at, AcknowledgedBy: by})
}
