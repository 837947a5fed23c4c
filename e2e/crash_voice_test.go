package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	os.WriteFile(filepath.Join(ws, "agents", "talker.yaml"), []byte(talkerAgent), 0o644)
	cfgPath := filepath.Join(ws, "config.yaml")
	os.WriteFile(cfgPath, []byte(voiceConfig(f, seconds, "  enforcement_mode: hard\n  daily_budget_usd: 5.00\n  reservation_ttl: 4s\n")), 0o644)
	env, port, _ := gatewayEnv(t, ws)
	env["AGENTRY_CONFIG_PATH"], env["AGENTRY_SERVER_API_KEY"] = cfgPath, key
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	var sess struct {
		RunID        string `json:"run_id"`
		URL          string `json:"url"`
		ClientSecret string `json:"client_secret"`
	}
	postJSONTo(t, base+"/api/v1/voice/sessions", key, `{"agent_id": "talker"}`, 201, &sess)
	if sess.RunID == "" || sess.URL == "" {
		t.Fatalf("mint answered %+v", sess)
	}
	// The session is used (the provider serves a response) before the
	// crash: spend the gateway must not lose.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := speak(ctx, t, sess.URL, sess.ClientSecret)
	defer c.CloseNow()
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
		getJSONFrom(t, base+"/api/v1/costs/calls?run_id="+sess.RunID, key, &calls)
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
	getJSONFrom(t, base+"/api/v1/costs/status", key, &st)
	if st.InFlight.Reservations != 0 || st.Periods.Day.SpendMicros < worstMicros {
		t.Fatalf("after the reaper: %+v, want no reservation held and the session's worst case in the day's spend", st)
	}
	t.Logf("session %s priced at its worst case, %d micros, after the crash", sess.RunID, row.CostMicros)
}
