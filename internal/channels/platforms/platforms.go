// Package platforms lists the messaging platforms this build has adapters
// for: the one place a new platform's folder is registered.
package platforms

import (
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/channels/discord"
	"github.com/agentryhq/agentry/internal/channels/slack"
	"github.com/agentryhq/agentry/internal/channels/telegram"
)

// Factories are the adapters by platform type.
func Factories() map[string]channels.Factory {
	return map[string]channels.Factory{
		channels.TypeTelegram: telegram.New,
		channels.TypeSlack:    slack.New,
		channels.TypeDiscord:  discord.New,
	}
}
