package api

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/hangup"
	"github.com/agentryhq/agentry/internal/webhook"
	"github.com/agentryhq/agentry/models"
)

// WebhooksFeature serves the inbound webhook trigger
// POST /webhooks/{agent_id}.
type WebhooksFeature struct {
	Webhooks *webhook.Service
	// Hangups cancels a synchronous run whose caller disconnects, as for
	// POST /chat (nil: the run goes on to the end).
	Hangups *hangup.Watcher
}

// HeaderIdempotencyKey makes a repeated webhook return the first reply.
const HeaderIdempotencyKey = "Idempotency-Key"

// headerReplayed marks a reply served from the idempotency store.
const headerReplayed = "Idempotent-Replayed"

// Register implements Feature.
func (f *WebhooksFeature) Register(r fiber.Router) {
	r.Post("/webhooks/:agent_id", f.receive)
	r.Get("/webhooks/:agent_id/runs/:run_id", f.run)
}

// run answers an asynchronous run: {run_id, agent_id, status, reply,
// error, session_id, thread_id, user_id, response_id, delivery_id,
// created_at, finished_at}. Only its requester (or an admin) reads it.
func (f *WebhooksFeature) run(c *fiber.Ctx) error {
	if f.Webhooks == nil {
		return fault.NotEnabled("webhooks not enabled")
	}
	r, err := f.Webhooks.Run(c.UserContext(), c.Params("agent_id"), c.Params("run_id"))
	if errors.Is(err, models.ErrNotFound) || (err == nil && !mayRead(c, r.Subject)) {
		return Errf(fiber.StatusNotFound, "no webhook run %q of agent %q", c.Params("run_id"), c.Params("agent_id")).WithCode("not_found")
	}
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"run_id": r.ID, "agent_id": r.AgentID, "status": r.Status, "reply": r.Reply, "error": r.Error,
		"session_id": r.SessionID, "thread_id": r.ThreadID, "user_id": r.UserID, "response_id": r.ResponseID,
		"delivery_id": r.DeliveryID, "turns": r.Turns, "created_at": r.CreatedAt, "finished_at": r.FinishedAt})
}

// mayRead: a run is read by the subject that requested it, or an admin.
func mayRead(c *fiber.Ctx, subject string) bool {
	p := Principal(c)
	return p != nil && (p.Subject == subject || p.Role == auth.RoleAdmin)
}

// receive runs the agent on any JSON body, mapped by the agent's webhook
// mapping, and answers {reply, session_id, thread_id, user_id} (plus
// run_id and response_id). Agents whose trigger is not webhook answer 404.
func (f *WebhooksFeature) receive(c *fiber.Ctx) error {
	if f.Webhooks == nil {
		return fault.NotEnabled("webhooks not enabled")
	}
	// c.Body is only valid during the handler; the service finishes
	// before the handler returns.
	if c.QueryBool("async") {
		acc, err := f.Webhooks.HandleAsync(c.UserContext(), webhook.Request{
			AgentID: c.Params("agent_id"), Body: c.Body(), IdempotencyKey: c.Get(HeaderIdempotencyKey)})
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusAccepted).JSON(acc)
	}
	// A caller that hangs up cancels the run like POST /chat: the provider
	// call stops, the exchange is not stored, an Idempotency-Key claim is
	// released (a retry runs again). Before #42 it ran to the end.
	ctx, stop := f.Hangups.Watch(c.UserContext(), c.Context().Conn())
	defer stop()
	reply, replayed, err := f.Webhooks.Handle(ctx, webhook.Request{
		AgentID: c.Params("agent_id"), Body: c.Body(), IdempotencyKey: c.Get(HeaderIdempotencyKey)})
	if err != nil {
		return err
	}
	if replayed {
		c.Set(headerReplayed, "true")
	}
	return c.JSON(reply)
}
