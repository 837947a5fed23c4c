package gateway

import (
	"net/url"
	"os"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/delivery"
)

// configSecrets are the secret values the configuration names, directly or
// through an environment variable: provider keys, API keys, the JWT secret,
// the webhook channel's secret and header values, hook secrets, messaging channels' credentials, the Temporal
// API key and passwords in connection strings. They are registered with
// package scrub so that no outside text carries them out of the gateway.
func configSecrets(cfg *config.Config, apiKey string) []string {
	out := []string{apiKey, cfg.Server.APIKey, cfg.Auth.JWT.Secret, env(cfg.Auth.JWT.SecretEnv),
		cfg.Channels.Webhook.Secret, cfg.Temporal.APIKey}
	for _, p := range cfg.LLM.Providers {
		out = append(out, p.APIKey, env(p.APIKeyEnv))
	}
	for _, k := range cfg.Auth.Keys {
		out = append(out, k.Key, env(k.KeyEnv))
	}
	for _, ch := range cfg.Channels.Messaging {
		out = append(out, ch.BotToken, ch.SigningSecret, ch.AppToken, ch.SecretToken)
	}
	for _, h := range cfg.Hooks {
		out = append(out, env(h.SecretEnv))
	}
	out = append(out, delivery.HeaderValues(cfg.Channels.Webhook.Headers)...)
	out = append(out, urlPassword(cfg.Storage.DSN), urlPassword(cfg.RateLimit.RedisURL))
	return out
}

func env(name string) string {
	if name == "" {
		return ""
	}
	return os.Getenv(name)
}

// urlPassword is the password of a URL-shaped connection string, or "".
func urlPassword(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}
