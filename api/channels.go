package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

// ChannelsFeature serves the channel adapters (the webhook channel and the
// messaging channels) and the delivery records:
//
//	GET   /channels                 {"channels": [channel]}
//	GET   /channels/{id}            channel
//	POST  /channels/{id}/enable     channel            (write)
//	POST  /channels/{id}/disable    channel            (write)
//	PATCH /channels/{id}            {"settings": {...}} -> channel (admin)
//	POST  /channels/{id}/send       {"text", "to"?} -> 202 {"delivery_id"} (write)
//	POST  /channels/{id}/pair       channel (pairing started; the QR code in adapter.detail.qr) (admin)
//	POST  /channels/{id}/unpair     channel (admin)
//	GET   /channels/{id}/messages?limit=   {"messages": [...]} inbound messages, newest first
//	GET   /channels/{id}/qr.png     the pairing QR code as a PNG, 404 unless pairing (admin; channels_qr.go)
//	GET   /deliveries?channel=&limit=   {"deliveries": [...], "count"}
//	GET   /deliveries/{id}          delivery with its attempts
//
// A channel is {"id","type","enabled","settings","overridden","status"};
// settings are redacted (secret and credential header values read
// ********). Messaging channels add "adapter" (the receiver's state) and
// "messages" (inbound counts, the last message).
type ChannelsFeature struct {
	Channels   *delivery.Channels
	Messaging  *channels.Service
	Deliveries *delivery.Service
	Store      models.DeliveryStore
}

// messagingView is a messaging channel with its deliveries' record.
type messagingView struct {
	*channels.View
	Status delivery.ChannelStatus `json:"status"`
}

func (f *ChannelsFeature) isMessaging(id string) bool {
	return f.Messaging != nil && id != delivery.ChannelWebhook && f.Messaging.IsMessaging(id)
}

func (f *ChannelsFeature) messagingView(c *fiber.Ctx, id string) (*messagingView, error) {
	v, err := f.Messaging.View(c.UserContext(), id)
	if err != nil {
		return nil, err
	}
	st, err := f.Channels.Stats(c.UserContext(), id)
	if err != nil {
		return nil, err
	}
	return &messagingView{View: v, Status: st}, nil
}

// Register implements Feature.
func (f *ChannelsFeature) Register(r fiber.Router) {
	r.Get("/channels", f.list)
	r.Get("/channels/:id", f.get)
	r.Post("/channels/:id/enable", f.enable)
	r.Post("/channels/:id/disable", f.disable)
	r.Patch("/channels/:id", f.patch)
	r.Post("/channels/:id/send", f.send)
	r.Post("/channels/:id/pair", f.pair)
	r.Post("/channels/:id/unpair", f.unpair)
	r.Get("/channels/:id/messages", f.messages)
	r.Get("/channels/:id/qr.png", f.qrPNG)
	r.Get("/deliveries", f.deliveries)
	r.Get("/deliveries/:id", f.deliveryByID)
}

func (f *ChannelsFeature) ready() error {
	if f.Channels == nil || f.Deliveries == nil {
		return fault.NotEnabled("channels not enabled")
	}
	return nil
}

func (f *ChannelsFeature) list(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	chs, err := f.Channels.List(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]any, 0, len(chs)+4)
	for i := range chs {
		out = append(out, chs[i])
	}
	if f.Messaging != nil {
		for _, id := range channels.IDs(f.Messaging.Config) {
			v, err := f.messagingView(c, id)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
	}
	return c.JSON(fiber.Map{"channels": out})
}

func (f *ChannelsFeature) get(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if id := c.Params("id"); f.isMessaging(id) {
		v, err := f.messagingView(c, id)
		if err != nil {
			return err
		}
		return c.JSON(v)
	}
	v, err := f.Channels.View(c.UserContext(), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(v)
}

func (f *ChannelsFeature) enable(c *fiber.Ctx) error  { return f.setEnabled(c, true) }
func (f *ChannelsFeature) disable(c *fiber.Ctx) error { return f.setEnabled(c, false) }

func (f *ChannelsFeature) setEnabled(c *fiber.Ctx, on bool) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	if id := c.Params("id"); f.isMessaging(id) {
		return f.patchMessaging(c, id, map[string]any{"enabled": on})
	}
	v, err := f.Channels.SetEnabled(c.UserContext(), c.Params("id"), on, Principal(c).Subject)
	if err != nil {
		return err
	}
	return c.JSON(v)
}

type channelPatch struct {
	Settings map[string]any `json:"settings"`
}

func (f *ChannelsFeature) patch(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	var b channelPatch
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	if b.Settings == nil {
		return badRequest("body must be {\"settings\": {\"key\": value, ...}}")
	}
	if id := c.Params("id"); f.isMessaging(id) {
		return f.patchMessaging(c, id, b.Settings)
	}
	v, err := f.Channels.Patch(c.UserContext(), c.Params("id"), b.Settings, Principal(c).Subject)
	if err != nil {
		return err
	}
	return c.JSON(v)
}

type sendBody struct {
	Text string `json:"text"`
	To   string `json:"to"`
}

func (f *ChannelsFeature) send(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var b sendBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	id, err := f.Deliveries.Send(c.UserContext(), delivery.SendRequest{Channel: c.Params("id"), Text: b.Text, To: b.To, Source: delivery.SourceAPI})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"delivery_id": id})
}

// deliveryView is a delivery record as the API shows it.
type deliveryView struct {
	ID             string        `json:"id"`
	Channel        string        `json:"channel"`
	Source         string        `json:"source"`
	AgentID        string        `json:"agent_id,omitempty"`
	Target         string        `json:"target"`
	WorkflowID     string        `json:"workflow_id"`
	Status         string        `json:"status"`
	Attempts       int           `json:"attempts"`
	LastStatusCode int           `json:"last_status_code"`
	LastError      string        `json:"last_error"`
	CreatedAt      time.Time     `json:"created_at"`
	UpdatedAt      time.Time     `json:"updated_at"`
	DeliveredAt    *time.Time    `json:"delivered_at"`
	AttemptList    []attemptView `json:"attempt_list,omitempty"`
}

type attemptView struct {
	Attempt    int       `json:"attempt"`
	StatusCode int       `json:"status_code"`
	Error      string    `json:"error"`
	DurationMs int64     `json:"duration_ms"`
	At         time.Time `json:"at"`
}

func toDeliveryView(d *models.Delivery) deliveryView {
	return deliveryView{ID: d.ID, Channel: d.Channel, Source: d.Source, AgentID: d.AgentID, Target: d.Target, WorkflowID: d.WorkflowID,
		Status: d.Status, Attempts: d.Attempts, LastStatusCode: d.LastStatusCode, LastError: d.LastError,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(), DeliveredAt: d.DeliveredAt}
}

func (f *ChannelsFeature) deliveries(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	rows, err := f.Store.ListDeliveries(c.UserContext(), c.Query("channel"), limit)
	if err != nil {
		return err
	}
	out := make([]deliveryView, 0, len(rows))
	for i := range rows {
		out = append(out, toDeliveryView(&rows[i]))
	}
	return c.JSON(fiber.Map{"deliveries": out, "count": len(out)})
}

func (f *ChannelsFeature) deliveryByID(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	d, atts, err := f.Store.GetDelivery(c.UserContext(), c.Params("id"))
	if errors.Is(err, models.ErrNotFound) {
		return notFound("delivery %s not found", c.Params("id"))
	}
	if err != nil {
		return err
	}
	v := toDeliveryView(d)
	v.AttemptList = make([]attemptView, 0, len(atts))
	for _, a := range atts {
		v.AttemptList = append(v.AttemptList, attemptView{Attempt: a.Attempt, StatusCode: a.StatusCode, Error: a.Error, DurationMs: a.DurationMs, At: a.At.UTC()})
	}
	return c.JSON(v)
}

func (f *ChannelsFeature) patchMessaging(c *fiber.Ctx, id string, settings map[string]any) error {
	if _, err := f.Messaging.Patch(c.UserContext(), id, settings, Principal(c).Subject); err != nil {
		return err
	}
	v, err := f.messagingView(c, id)
	if err != nil {
		return err
	}
	return c.JSON(v)
}

func (f *ChannelsFeature) pair(c *fiber.Ctx) error   { return f.pairing(c, true) }
func (f *ChannelsFeature) unpair(c *fiber.Ctx) error { return f.pairing(c, false) }

// pairing starts pairing (the QR code appears in adapter.detail.qr; poll
// GET /channels/{id}) or logs the device out. Admin: a paired device reads
// and sends as the account that scanned the code.
func (f *ChannelsFeature) pairing(c *fiber.Ctx, pair bool) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	id := c.Params("id")
	if !f.isMessaging(id) {
		return fmt.Errorf("%w: %s", channels.ErrNotPaired, id)
	}
	var err error
	if pair {
		err = f.Messaging.Pair(c.UserContext(), id)
	} else {
		err = f.Messaging.Unpair(c.UserContext(), id)
	}
	if err != nil {
		return err
	}
	v, err := f.messagingView(c, id)
	if err != nil {
		return err
	}
	return c.JSON(v)
}

// channelMessageView is an inbound message's record (no text: the
// conversation is in the session).
type channelMessageView struct {
	MessageID  string     `json:"message_id"`
	ChatID     string     `json:"chat_id"`
	ThreadID   string     `json:"thread_id,omitempty"`
	UserID     string     `json:"user_id"`
	Status     string     `json:"status"`
	RunID      string     `json:"run_id,omitempty"`
	ReplyIDs   []string   `json:"reply_ids"`
	Error      string     `json:"error,omitempty"`
	ReceivedAt time.Time  `json:"received_at"`
	AnsweredAt *time.Time `json:"answered_at"`
}

func (f *ChannelsFeature) messages(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	id := c.Params("id")
	if !f.isMessaging(id) {
		return fmt.Errorf("%w: %s (only messaging channels receive messages)", channels.ErrUnknownChannel, id)
	}
	limit, err := queryInt(c, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	rows, err := f.Messaging.Store.ListChannelMessages(c.UserContext(), id, limit)
	if err != nil {
		return err
	}
	out := make([]channelMessageView, 0, len(rows))
	for _, r := range rows {
		v := channelMessageView{MessageID: r.MessageID, ChatID: r.ChatID, ThreadID: r.ThreadID, UserID: r.UserID, Status: r.Status, RunID: r.RunID,
			ReplyIDs: []string{}, Error: r.Error, ReceivedAt: r.ReceivedAt.UTC(), AnsweredAt: r.AnsweredAt}
		if r.ReplyIDs != "" {
			v.ReplyIDs = strings.Split(r.ReplyIDs, ",")
		}
		out = append(out, v)
	}
	return c.JSON(fiber.Map{"messages": out, "count": len(out)})
}
