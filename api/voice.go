package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/voice"
)

// VoiceFeature mints realtime voice sessions (docs/voice.md):
//
//	POST /voice/sessions   {"agent_id": ...}: a short-lived client session for a browser or app
//
// Like chat it is open to every role; a key scoped to agents may mint only
// for those. The provider key never leaves the gateway.
type VoiceFeature struct {
	Voice *voice.Service
}

// Register implements Feature.
func (f *VoiceFeature) Register(r fiber.Router) {
	r.Post("/voice/sessions", f.mint)
}

type voiceBody struct {
	AgentID string `json:"agent_id" maxlen:"63"`
}

func (f *VoiceFeature) mint(c *fiber.Ctx) error {
	var b voiceBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	if b.AgentID == "" {
		return badRequest("agent_id: is required").With("field", "agent_id")
	}
	p := auth.FromContext(c.UserContext())
	if p != nil && !p.MayUseAgent(b.AgentID) {
		return Errf(fiber.StatusForbidden, "this key may not use agent %q", b.AgentID).WithCode("forbidden")
	}
	who := voice.Who{}
	if p != nil {
		who.Subject = p.CostSubject("")
	}
	s, err := f.Voice.Mint(c.UserContext(), b.AgentID, who)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(s)
}
