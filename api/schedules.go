package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/schedules"
)

// SchedulesFeature serves the scheduled agents:
//
//	GET  /schedules                      {"schedules": [schedule]}
//	POST /schedules/{agent_id}/trigger   202 {"workflow_id"} (write)
//
// A schedule is {"agent_id","schedule_id","cron","timezone","paused",
// "synced","next_fire_times":[RFC 3339],"output_channel","last_outcome":
// {"at","status","error",...} or null}.
type SchedulesFeature struct {
	Schedules *schedules.Manager
}

// Register implements Feature.
func (f *SchedulesFeature) Register(r fiber.Router) {
	r.Get("/schedules", f.list)
	r.Post("/schedules/:agent_id/trigger", f.trigger)
}

func (f *SchedulesFeature) ready() error {
	if f.Schedules == nil {
		return fault.NotEnabled("schedules not enabled")
	}
	return nil
}

func (f *SchedulesFeature) list(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	views, err := f.Schedules.List(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"schedules": views})
}

func (f *SchedulesFeature) trigger(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	wid, err := f.Schedules.Trigger(c.UserContext(), c.Params("agent_id"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"workflow_id": wid})
}
