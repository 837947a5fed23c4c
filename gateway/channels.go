package gateway

import (
	"net/http"
	"time"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/channels/platforms"
)

// addMessaging builds the messaging channels (Telegram, Slack, Discord,
// WhatsApp): their settings, receivers (started by StartChannels in the
// serving gateway only, not in a worker-only process) and the senders the
// activities use. Platform API calls go to the operator's api_base_url,
// never to an address a user chose, so they do not pass the SSRF guard.
func (s *Services) addMessaging() error {
	cfg, g := s.gw.Config, s.gw
	db, err := g.Store.DB.DB()
	if err != nil {
		return err
	}
	s.Messaging = &channels.Service{Config: &cfg.Config, Store: g.Store, Secrets: s.Secrets, Factories: platforms.Factories(db, g.Store.DriverName()),
		Enqueue: &channels.TemporalEnqueuer{Client: g.Temporal, TaskQueue: cfg.Temporal.TaskQueue},
		// Long polls wait 25 s; the client allows for them.
		HTTP: &http.Client{Timeout: 75 * time.Second}, Log: s.log, Agents: s.Agents}
	s.Channels.Messaging = s.Messaging
	return nil
}

// StartChannels runs the enabled channels' receivers until Stop.
func (s *Services) StartChannels() { s.Messaging.Start(s.bg) }
