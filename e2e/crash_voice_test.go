package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/agentryhq/agentry/dev/fakerealtime"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestVoiceSessionPricedAfterGatewayCrash SIGKILLs the gateway while a
// voice session it minted is in use (issue 50: voice spend in the ledger
// and under the budgets like chat). The settlement the dead process would
// have made from the session's usage never happens, so the session must not
// be free: after the restart its ledger row is priced at the reserved worst
// case for the session's whole length (usage estimated), its reservation is
// released, and the day's spend counts it.
func TestVoiceSessionPricedAfterGatewayCrash(t *testing.T) {
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")
	f := fakerealtime.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)

	const key = "crash-voice-key-0123456789"
	const seconds = 60
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "talker.yaml"), []byte("id: talker\nvoice: true\nsystem_prompt: Be brief.\n"), 0o644)
	cfgPath := filepath.Join(ws, "config.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`voice: {provider: openai, model: gpt-realtime, base_url: %q, api_key: %q, max_session_seconds: %d}
costs:
  enforcement_mode: hard
  daily_budget_usd: 5.00
  reservation_ttl: 4s
  pricing:
    openai/gpt-realtime: {input_per_mtok: 32, output_per_mtok: 64, source: test, version: r1}
`, f.BaseURL(), f.APIKey, seconds)), 0o644)
	env, port, _ := gatewayEnv(t, ws)
	env["AGENTRY_CONFIG_PATH"], env["AGENTRY_SERVER_API_KEY"] = cfgPath, key
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	do := func(method, path string, body any, out any) int {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	var sess struct {
		RunID        string `json:"run_id"`
		URL          string `json:"url"`
		ClientSecret string `json:"client_secret"`
	}
	if st := do("POST", "/api/v1/voice/sessions", map[string]any{"agent_id": "talker"}, &sess); st != 201 || sess.RunID == "" {
		t.Fatalf("mint: %d %+v", st, sess)
	}
	// The session is used (the provider serves a response) before the
	// crash: spend the gateway must not lose.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, sess.URL, &websocket.DialOptions{Subprotocols: []string{"realtime", "openai-insecure-api-key." + sess.ClientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	wsjson.Write(ctx, c, map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(make([]byte, 96000))})
	wsjson.Write(ctx, c, map[string]any{"type": "input_audio_buffer.commit"})
	wsjson.Write(ctx, c, map[string]any{"type": "response.create"})
	for {
		var ev map[string]any
		if err := wsjson.Read(ctx, c, &ev); err != nil {
			t.Fatal(err)
		}
		if ev["type"] == "response.done" {
			break
		}
	}
	first.Kill(t)

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/", 90*time.Second, second)
	// Worst case for 60 s: 10 input and 20 output tokens a second (the
	// reservation adds the instructions' few tokens to the input).
	const worstMicros = seconds*10*32 + seconds*20*64
	var row ledgerRow
	deadline := time.Now().Add(60 * time.Second)
	for {
		var calls struct {
			Calls []ledgerRow `json:"calls"`
		}
		do("GET", "/api/v1/costs/calls?run_id="+sess.RunID, nil, &calls)
		if len(calls.Calls) == 1 && calls.Calls[0].Outcome != "pending" {
			row = calls.Calls[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the crashed session's ledger row is still %+v\n%s", calls.Calls, second.Output)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if row.Source != "voice" || row.Outcome != "unsettled" || row.CostMicros < worstMicros || !row.UsageEstimated || row.PricingStatus != "estimated" {
		t.Fatalf("crashed session's row %+v, want voice, unsettled, at least %d micros (the worst case of the whole length), usage estimated", row, worstMicros)
	}
	var st costStatus
	do("GET", "/api/v1/costs/status", nil, &st)
	if st.InFlight.Reservations != 0 || st.Periods.Day.SpendMicros < worstMicros {
		t.Fatalf("after the reaper: %+v, want no reservation held and the session's worst case in the day's spend", st)
	}
	t.Logf("session %s priced at its worst case, %d micros, after the crash", sess.RunID, row.CostMicros)
}
