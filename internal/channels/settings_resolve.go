package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/models"
)

// SecretStore keeps channel credentials set through the API sealed
// (internal/secrets.Store), under "channels.<id>.<key>".
type SecretStore interface {
	Set(ctx context.Context, name, value string) error
	Reveal(ctx context.Context, name string) (string, error)
	Delete(ctx context.Context, name string) error
}

// ErrUnknownChannel is a channel id no adapter has.
var ErrUnknownChannel = fault.NotFound("unknown channel")

// settingError is a bad settings key or value (400), naming the key.
func settingError(key, msg string) error { return &fault.Invalid{Field: "settings." + key, Msg: msg} }

// credentialKeys are the settings that are secrets.
var credentialKeys = []string{"bot_token", "signing_secret", "app_token", "secret_token"}

// plainKeys are the other settings the API may change.
var plainKeys = []string{"enabled", "agent", "mode", "api_base_url", "public_url", "trigger", "allow_groups", "allowed_chats", "allowed_users"}

// SettingKeys lists every key PATCH /channels/{id} takes for a messaging
// channel.
func SettingKeys() []string {
	out := append(append([]string{}, plainKeys...), credentialKeys...)
	sort.Strings(out)
	return out
}

// IDs are the messaging channels: every platform by its own name (so
// `agentry channel telegram configure` works on a gateway without a
// config file), and the ids config.yaml names.
func IDs(cfg *config.Config) []string {
	seen := map[string]bool{}
	for _, t := range config.MessagingTypes {
		seen[t] = true
	}
	for id := range cfg.Channels.Messaging {
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// IsChannel tells whether id is a messaging channel.
func IsChannel(cfg *config.Config, id string) bool {
	_, ok := cfg.Channels.Messaging[id]
	return ok || slices.Contains(config.MessagingTypes, id)
}

// resolve reads a channel's effective settings: config.yaml's entry, then
// the API's changes (database row), then credentials from the secret
// store. overridden lists the keys the API changed.
func resolve(ctx context.Context, cfg *config.Config, store models.ChannelStore, sec SecretStore, id string) (Settings, []string, error) {
	if !IsChannel(cfg, id) {
		return Settings{}, nil, fmt.Errorf("%w: %s", ErrUnknownChannel, id)
	}
	base := cfg.Channels.Messaging[id]
	s := Settings{ID: id, Type: base.TypeOf(id), Enabled: base.Enabled, Agent: base.Agent, Mode: base.Mode, APIBaseURL: base.APIBaseURL,
		PublicURL: base.PublicURL, BotToken: base.BotToken, SigningSecret: base.SigningSecret, AppToken: base.AppToken, SecretToken: base.SecretToken,
		Trigger: base.Trigger, AllowGroups: base.AllowGroups, AllowedChats: base.AllowedChats, AllowedUsers: base.AllowedUsers}
	row, err := store.GetChannelSetting(ctx, id)
	if err != nil {
		return s, nil, err
	}
	var over map[string]json.RawMessage
	if err := json.Unmarshal([]byte(row.Settings), &over); err != nil {
		return s, nil, fmt.Errorf("settings of channel %s in the database: %w", id, err)
	}
	var overridden []string
	for k, raw := range over {
		if err := apply(&s, k, raw); err != nil {
			return s, nil, fmt.Errorf("settings of channel %s in the database: %w", id, err)
		}
		overridden = append(overridden, k)
	}
	for _, k := range splitList(row.SecretKeys) {
		v := ""
		if sec != nil {
			v, err = sec.Reveal(ctx, secretName(id, k))
			if err != nil && !errors.Is(err, secrets.ErrNotFound) {
				return s, nil, fmt.Errorf("read channel %s's %s: %w", id, k, err)
			}
		}
		*credential(&s, k) = v
		overridden = append(overridden, k)
	}
	sort.Strings(overridden)
	return s, overridden, nil
}

func secretName(id, key string) string { return "channels." + id + "." + key }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// credential is the field of a credential key.
func credential(s *Settings, key string) *string {
	switch key {
	case "bot_token":
		return &s.BotToken
	case "signing_secret":
		return &s.SigningSecret
	case "app_token":
		return &s.AppToken
	case "secret_token":
		return &s.SecretToken
	}
	return new(string)
}

// apply sets one plain key from its JSON value, checking it.
func apply(s *Settings, key string, raw json.RawMessage) error {
	str := func(dst *string) error {
		var v *string
		if err := json.Unmarshal(raw, &v); err != nil {
			return settingError(key, "expected a string")
		}
		*dst = ""
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
		return nil
	}
	list := func(dst *[]string) error {
		var v []string
		if err := json.Unmarshal(raw, &v); err != nil {
			// "1,2" as one string is a list too (the CLI's --set).
			var one string
			if json.Unmarshal(raw, &one) != nil {
				return settingError(key, "expected a list of ids")
			}
			v = splitList(one)
		}
		*dst = v
		return nil
	}
	boolean := func(dst *bool) error {
		if err := json.Unmarshal(raw, dst); err != nil {
			return settingError(key, "expected true or false")
		}
		return nil
	}
	switch key {
	case "enabled":
		return boolean(&s.Enabled)
	case "allow_groups":
		return boolean(&s.AllowGroups)
	case "agent":
		return str(&s.Agent)
	case "trigger":
		return str(&s.Trigger)
	case "mode":
		if err := str(&s.Mode); err != nil {
			return err
		}
		if modes := config.ChannelModes(s.Type); s.Mode != "" && !slices.Contains(modes, s.Mode) {
			return settingError(key, fmt.Sprintf("%q is not a %s mode (use %s)", s.Mode, s.Type, strings.Join(modes, " or ")))
		}
		return nil
	case "api_base_url", "public_url":
		dst := &s.APIBaseURL
		if key == "public_url" {
			dst = &s.PublicURL
		}
		if err := str(dst); err != nil {
			return err
		}
		if *dst != "" {
			if u, err := url.Parse(*dst); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return settingError(key, fmt.Sprintf("%q is not an http(s) URL", *dst))
			}
		}
		return nil
	case "allowed_chats":
		return list(&s.AllowedChats)
	case "allowed_users":
		return list(&s.AllowedUsers)
	}
	return settingError(key, "unknown key (use "+strings.Join(SettingKeys(), ", ")+")")
}
