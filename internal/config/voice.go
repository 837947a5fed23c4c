package config

import "net/url"

// MaxVoiceSessionSeconds bounds voice.max_session_seconds: a session's
// reservation must be settled before the cost controller's reservation_ttl
// (15 minutes by default) treats it as abandoned.
const MaxVoiceSessionSeconds = 600

// DefaultVoiceSessionSeconds is voice.max_session_seconds when unset.
const DefaultVoiceSessionSeconds = 300

// SessionSeconds is max_session_seconds in effect.
func (v VoiceConfig) SessionSeconds() int {
	if v.MaxSessionSeconds <= 0 {
		return DefaultVoiceSessionSeconds
	}
	return v.MaxSessionSeconds
}

func validateVoice(v VoiceConfig, bad func(key, format string, args ...any)) {
	if v.MaxSessionSeconds < 0 || v.MaxSessionSeconds > MaxVoiceSessionSeconds {
		bad("voice.max_session_seconds", "%d is outside 0..%d", v.MaxSessionSeconds, MaxVoiceSessionSeconds)
	}
	if v.BaseURL != "" {
		if u, err := url.Parse(v.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			bad("voice.base_url", "%q is not an http(s) URL without credentials", v.BaseURL)
		}
	}
	if v.Provider != "" && v.Model == "" {
		bad("voice.model", "is required when voice.provider is set")
	}
}
