package api

import (
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/fault"
)

// IngressFeature serves the messaging platforms' callbacks, outside
// /api/v1 (a platform cannot carry the gateway's key):
//
//	POST /ingress/{channel id}    Telegram webhook updates, Slack Events API
//
// Each request is verified by the platform's own scheme in the channel's
// adapter (Telegram's secret token, Slack's signature with its 5-minute
// window): an unverified callback gets 401 and starts nothing. The answer
// is sent only after the message is durable work (Temporal accepted it),
// so a platform that gets no 2xx delivers it again.
type IngressFeature struct {
	Channels *channels.Service
}

// Register implements Feature.
func (f *IngressFeature) Register(r fiber.Router) {
	r.Post("/ingress/:id", f.ingress)
}

func (f *IngressFeature) ingress(c *fiber.Ctx) error {
	if f.Channels == nil {
		return fault.NotEnabled("channels not enabled")
	}
	req := channels.IngressRequest{Header: http.Header{}, Body: append([]byte(nil), c.Body()...), Received: time.Now()}
	for k, v := range c.GetReqHeaders() {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	res, err := f.Channels.Ingress(c.UserContext(), c.Params("id"), req)
	if err != nil {
		return err
	}
	if res.ContentType != "" {
		c.Set(fiber.HeaderContentType, res.ContentType)
	}
	if res.Status == 0 {
		res.Status = http.StatusOK
	}
	return c.Status(res.Status).Send(res.Body)
}
