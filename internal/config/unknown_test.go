package config

import (
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestUnknownKeysAreNamedWithTheNearestKnownKey(t *testing.T) {
	text := []byte(`
costs:
  enforcment_mode: hard
  daily_budget_usd: 5
server:
  port: 18790
  colour: blue
llm:
  providers:
    openai: {type: openai, api_kye: x}
auth:
  keys:
    - {key: abcdefghijklmnop, role: admin, trust_user_ids: true}
mcp:
  anything: {goes: here}
channels:
  telegram: {token: x}
frobnicate: 1
`)
	cfg := Defaults()
	if err := Parse(text, "config.yaml", &cfg); err != nil {
		t.Fatal(err) // unknown keys load: kept, not refused
	}
	got := UnknownKeys(text)
	want := []UnknownKey{
		{Key: "auth.keys[0].trust_user_ids", Near: "trust_user_id"},
		{Key: "channels.telegram.token"},
		{Key: "costs.enforcment_mode", Near: "enforcement_mode"},
		{Key: "frobnicate"},
		{Key: "llm.providers.openai.api_kye", Near: "api_key"},
		{Key: "server.colour"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("unknown keys\n got %v\nwant %v", got, want)
	}
	if s := got[2].String(); s != "costs.enforcment_mode (did you mean enforcement_mode?)" {
		t.Fatalf("String: %q", s)
	}
	// Every key the defaults write is known.
	d := Defaults()
	written, err := yaml.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	if u := UnknownKeys(written); len(u) != 0 {
		t.Fatalf("the defaults, written out: %v", u)
	}
}
