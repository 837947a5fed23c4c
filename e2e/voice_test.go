package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/agentryhq/agentry/dev/fakerealtime"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

func startVoiceGateway(t *testing.T, seconds int, extra string) (*gatewaytest.Gateway, *fakerealtime.Server) {
	t.Helper()
	f := fakerealtime.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{
			"talker.yaml": talkerAgent,
			"mute.yaml":   "id: mute\n",
		},
		Config: voiceConfig(f, seconds, extra)})
	return g, f
}

const talkerAgent = "id: talker\nvoice: true\nsystem_prompt: Be brief.\n"

// voiceConfig is the voice section against the fake and the realtime
// model's price; costsExtra adds lines (indented) to the costs section.
func voiceConfig(f *fakerealtime.Server, seconds int, costsExtra string) string {
	return fmt.Sprintf(`voice: {provider: openai, model: gpt-realtime, base_url: %q, api_key: %q, max_session_seconds: %d}
costs:
  pricing:
    openai/gpt-realtime: {input_per_mtok: 32, output_per_mtok: 64, source: test, version: r1}
%s`, f.BaseURL(), f.APIKey, seconds, costsExtra)
}

// speak opens a minted session the way a browser does and sends one turn
// (two seconds of audio, commit, response.create); the caller reads the
// answer's events.
func speak(ctx context.Context, t *testing.T, url, clientSecret string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"realtime", "openai-insecure-api-key." + clientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []map[string]any{
		{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(make([]byte, 96000))},
		{"type": "input_audio_buffer.commit"}, {"type": "response.create"},
	} {
		wsjson.Write(ctx, c, ev)
	}
	return c
}

// Issue 50: a session minted for an agent with voice, used against the
// fake (audio frames in, transcript and audio out), its usage settled in
// the ledger under source voice; the provider key is not in the answer.
func TestVoiceSessionMeteredInTheLedger(t *testing.T) {
	g, f := startVoiceGateway(t, 60, "")
	r := g.Do("POST", "/api/v1/voice/sessions", map[string]any{"agent_id": "talker"})
	if r.Status != 201 || r.JSON["max_seconds"] != float64(60) {
		t.Fatalf("mint: %d %s", r.Status, r.Raw)
	}
	if strings.Contains(string(r.Raw), f.APIKey) {
		t.Fatal("the provider key left the gateway")
	}
	runID := r.JSON["run_id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := speak(ctx, t, r.JSON["url"].(string), r.JSON["client_secret"].(string))
	var said strings.Builder
	audio := 0
	for done := false; !done; {
		var ev map[string]any
		if err := wsjson.Read(ctx, c, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev["type"] {
		case "response.output_audio_transcript.delta":
			said.WriteString(ev["delta"].(string))
		case "response.output_audio.delta":
			audio++
		case "response.done":
			done = true
		}
	}
	if said.String() != f.Reply || audio == 0 {
		t.Fatalf("said %q with %d audio frames", said.String(), audio)
	}
	c.Close(websocket.StatusNormalClosure, "bye")
	words := len(strings.Fields(f.Reply))
	var row map[string]any
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		l := g.Do("GET", "/api/v1/costs/calls?run_id="+runID, nil)
		if calls, _ := l.JSON["calls"].([]any); len(calls) == 1 {
			row = calls[0].(map[string]any)
			if row["outcome"] != "pending" && row["output_tokens"] == float64(words) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if row == nil || row["source"] != "voice" || row["agent_id"] != "talker" || row["input_tokens"] != float64(20) || row["output_tokens"] != float64(words) {
		t.Fatalf("ledger row %v", row)
	}
	if row["cost_micros"] != float64(20*32+words*64) {
		t.Fatalf("cost %v", row["cost_micros"])
	}
}

// A session that outlives its cap is closed by the gateway.
func TestVoiceSessionClosedAtItsCap(t *testing.T) {
	g, _ := startVoiceGateway(t, 1, "")
	r := g.Do("POST", "/api/v1/voice/sessions", map[string]any{"agent_id": "talker"})
	if r.Status != 201 {
		t.Fatalf("mint: %d %s", r.Status, r.Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, r.JSON["url"].(string), &websocket.DialOptions{Subprotocols: []string{"realtime", "openai-insecure-api-key." + r.JSON["client_secret"].(string)}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("the session ended with %v", err)
			}
			break
		}
	}
	if time.Since(start) > 15*time.Second {
		t.Fatal("the session outlived its cap by far")
	}
}

// A hard budget that cannot cover a session's worst case refuses the mint;
// an agent without voice is a 400; neither reaches the provider.
func TestVoiceMintRefusals(t *testing.T) {
	g, f := startVoiceGateway(t, 600, "  enforcement_mode: hard\n  daily_budget_usd: 0.0001\n")
	r := g.Do("POST", "/api/v1/voice/sessions", map[string]any{"agent_id": "talker"})
	if r.Status != 402 || r.JSON["code"] != "budget_exceeded" {
		t.Fatalf("over budget: %d %s", r.Status, r.Raw)
	}
	r = g.Do("POST", "/api/v1/voice/sessions", map[string]any{"agent_id": "mute"})
	if r.Status != 400 || !strings.Contains(fmt.Sprint(r.JSON["error"]), "no voice") {
		t.Fatalf("agent without voice: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("POST", "/api/v1/voice/sessions", map[string]any{"agent_id": "ghost"}); r.Status != 404 {
		t.Fatalf("unknown agent: %d", r.Status)
	}
	if f.Mints() != 0 {
		t.Fatalf("%d sessions minted", f.Mints())
	}
}

// `agentry voice setup` checks the provider by minting a client secret,
// writes the section (the key's variable name, never the key), writes
// nothing when the check fails, and is refused for a remote target.
func TestCLIVoiceSetup(t *testing.T) {
	f := fakerealtime.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	h := newHome(t)
	file := filepath.Join(h.WS, "config.yaml")
	os.MkdirAll(h.WS, 0o755)
	os.WriteFile(file, []byte("# mine\nlog:\n  level: info\n"), 0o644)
	args := []string{"voice", "setup", "--model", "gpt-realtime", "--base-url", f.BaseURL(), "--api-key-env", "FAKE_VOICE_KEY", "--max-session-seconds", "120"}

	r := h.runWith(map[string]string{"FAKE_VOICE_KEY": "wrong"}, "", args...)
	if r.Code == 0 || !strings.Contains(r.Stderr, "401") {
		t.Fatalf("a wrong key: %s", r)
	}
	if data, _ := os.ReadFile(file); string(data) != "# mine\nlog:\n  level: info\n" {
		t.Fatalf("a failed check wrote %q", data)
	}
	r = h.runWith(map[string]string{"FAKE_VOICE_KEY": f.APIKey}, "", append([]string{"--json"}, args...)...)
	expectCode(t, r, 0, "voice setup")
	expectContains(t, r.Stdout, `"checked": true`, "json")
	data, _ := os.ReadFile(file)
	for _, want := range []string{"# mine", "level: info", "provider: openai", "model: gpt-realtime", "api_key_env: FAKE_VOICE_KEY", "max_session_seconds: 120"} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("config.yaml lacks %q:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), f.APIKey) {
		t.Fatal("the key was written")
	}
	before, _ := os.ReadFile(file)
	r = h.runWith(map[string]string{"FAKE_VOICE_KEY": f.APIKey}, "", append([]string{"--gateway", "http://192.0.2.10:18789"}, args...)...)
	expectCode(t, r, 1, "remote voice setup")
	expectContains(t, r.Stderr, "no local files changed", "remote refusal")
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Fatal("the refused setup changed config.yaml")
	}
	if f.Mints() != 1 {
		t.Fatalf("%d mints: the refused setup reached the provider", f.Mints())
	}
}
