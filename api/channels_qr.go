package api

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/channels"
	qrpng "github.com/agentryhq/agentry/internal/channels/qr"
)

// qrPNGSize is the image's side in pixels: large enough for a phone camera
// to read across a desk, small enough to fit a console card.
const qrPNGSize = 320

// qrPNG serves GET /channels/{id}/qr.png: the pairing QR code of a
// QR-paired channel (WhatsApp) as a PNG, drawn on the gateway so the console
// loads nothing from elsewhere (its CSP allows images from its own origin
// only). Admin, like pair itself: whoever scans the code links the device.
// 404 when the channel is not pairing (no code to show). The code rotates,
// so the image is never cached.
func (f *ChannelsFeature) qrPNG(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	id := c.Params("id")
	if !f.isMessaging(id) {
		return notFound("channel %s has no pairing code (only QR-paired messaging channels do)", id)
	}
	v, err := f.Messaging.View(c.UserContext(), id)
	if err != nil {
		return err
	}
	qr := v.Adapter.Detail["qr"]
	if v.Adapter.State != channels.StatePairing || qr == "" {
		return notFound("channel %s is not pairing (state %s): POST /api/v1/channels/%s/pair first", id, v.Adapter.State, id)
	}
	png, err := qrpng.PNG(qr, qrPNGSize)
	if err != nil {
		return fmt.Errorf("draw the pairing QR code: %w", err)
	}
	c.Set(fiber.HeaderContentType, "image/png")
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Send(png)
}
