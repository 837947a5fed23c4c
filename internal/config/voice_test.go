package config

import (
	"strings"
	"testing"
)

// The voice section is typed now; files written for the free-form section
// keep loading (keys this version does not know stay in Extra).
func TestVoiceSectionTypedAndLenient(t *testing.T) {
	c := Defaults()
	if err := Parse([]byte("voice:\n  provider: openai\n  model: gpt-realtime\n  base_url: http://127.0.0.1:9/v1\n  voice_name: alloy\n"), "config.yaml", &c); err != nil {
		t.Fatal(err)
	}
	if err := Validate(&c); err != nil {
		t.Fatalf("a voice section is refused: %v", err)
	}
	if c.Voice.Provider != "openai" || c.Voice.Model != "gpt-realtime" || c.Voice.Extra["voice_name"] != "alloy" || c.Voice.SessionSeconds() != DefaultVoiceSessionSeconds {
		t.Fatalf("%+v", c.Voice)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"voice: {provider: openai, model: m, max_session_seconds: 3600}", "voice.max_session_seconds"},
		{"voice: {provider: openai}", "voice.model"},
		{"voice: {provider: openai, model: m, base_url: 'ftp://x'}", "voice.base_url"},
	} {
		c := Defaults()
		if err := Parse([]byte(bad.yaml), "config.yaml", &c); err != nil {
			t.Fatal(err)
		}
		if err := Validate(&c); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v", bad.yaml, err)
		}
	}
}
