// Package platforms lists the messaging platforms this build has adapters
// for: the one place a new platform's folder is registered.
package platforms

import (
	"database/sql"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/channels/discord"
	"github.com/agentryhq/agentry/internal/channels/slack"
	"github.com/agentryhq/agentry/internal/channels/telegram"
	"github.com/agentryhq/agentry/internal/channels/whatsapp"
)

// Factories are the adapters by platform type. db and dialect are the
// gateway's database (WhatsApp keeps its device store there).
func Factories(db *sql.DB, dialect string) map[string]channels.Factory {
	return map[string]channels.Factory{
		channels.TypeTelegram: telegram.New,
		channels.TypeSlack:    slack.New,
		channels.TypeDiscord:  discord.New,
		channels.TypeWhatsApp: whatsapp.Factory(db, dialect),
	}
}
