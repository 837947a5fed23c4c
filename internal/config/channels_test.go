package config

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestMessagingChannelsLoadFromFileAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := write(t, filepath.Join(dir, "c.yaml"), `channels:
  webhook: {enabled: false}
  support: {type: telegram, enabled: true, agent: helper, allowed_users: ["42"]}
`)
	cfg, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: dir, EnvConfigPath: path,
		"AGENTRY_CHANNELS_SUPPORT_BOT_TOKEN": "123:abc",
		"AGENTRY_CHANNELS_SLACK_ENABLED":     "true",
		"AGENTRY_CHANNELS_SLACK_MODE":        "socket"}))
	if err != nil {
		t.Fatal(err)
	}
	sup := cfg.Channels.Messaging["support"]
	if sup.TypeOf("support") != "telegram" || !sup.Enabled || sup.Agent != "helper" || sup.BotToken != "123:abc" || sup.AllowedUsers[0] != "42" {
		t.Fatalf("support channel: %+v", sup)
	}
	sl, ok := cfg.Channels.Messaging["slack"]
	if !ok || !sl.Enabled || sl.Mode != "socket" || sl.TypeOf("slack") != "slack" {
		t.Fatalf("a channel made from the environment alone: %+v (present %v)", sl, ok)
	}
	if _, ok := cfg.Channels.Messaging["discord"]; ok {
		t.Fatal("a channel no variable names was made")
	}
}

func TestBadMessagingChannelsAreRefusedByKey(t *testing.T) {
	for text, want := range map[string]string{
		"channels:\n  irc: {enabled: true}\n":                  "channels.irc: unknown channel \"irc\"",
		"channels:\n  ops: {type: teams}\n":                    "channels.ops.type: unknown platform \"teams\"",
		"channels:\n  telegram: {mode: push}\n":                "channels.telegram.mode: \"push\" is not a telegram mode",
		"channels:\n  slack: {api_base_url: \"ftp://x\"}\n":    "channels.slack.api_base_url",
		"channels:\n  telegram: {public_url: \"not a url\"}\n": "channels.telegram.public_url",
	} {
		cfg := Defaults()
		if err := Parse([]byte(text), "config.yaml", &cfg); err != nil {
			t.Fatal(err)
		}
		err := Validate(&cfg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want an error with %q, got %v", text, want, err)
		}
	}
}
