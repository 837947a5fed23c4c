package gateway

import (
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/voice"
)

// addVoice wires realtime voice sessions (internal/voice): admitted by the
// same cost controller as every LLM call (with the same rejection audit).
func (s *Services) addVoice() {
	s.Voice = &voice.Service{Agents: s.Agents, Gate: s.Costs.Observed(s.gw.auditRejection),
		Config: func() config.VoiceConfig { return s.gw.Config.Voice }}
}
