package browser

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentryhq/agentry/dev/fakerealtime"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// The Voice page's push-to-talk panel (issue 50) against the fake realtime
// provider: Chromium's fake microphone sends audio frames while the button
// is held, the transcripts and the spoken answer come back, and the
// session's usage lands in the ledger under source voice.
func TestConsoleVoicePushToTalk(t *testing.T) {
	chrome := testenv.Chromium(t)
	f := fakerealtime.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"talker.yaml": "id: talker\nvoice: true\n"},
		Config: fmt.Sprintf("voice: {provider: openai, model: gpt-realtime, base_url: %q, api_key: %q, max_session_seconds: 60}\n", f.BaseURL(), f.APIKey),
	})
	s := newSession(t, chrome, g.URL(), chromedp.Flag("use-fake-ui-for-media-stream", true), chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"))
	s.do(t, 30*time.Second, "sign in and open the voice page",
		chromedp.Navigate(g.URL()+"/#/voice"), chromedp.WaitVisible("#credential"),
		chromedp.SendKeys("#credential", gatewaytest.TestAPIKey), chromedp.Click("#signin-form button"),
		chromedp.WaitReady(`#voice-agent option[value="talker"]`))
	s.do(t, 30*time.Second, "start a session", chromedp.Click("#voice-start"), chromedp.WaitEnabled("#voice-talk"))
	s.eval(t, `document.querySelector("#voice-talk").dispatchEvent(new PointerEvent("pointerdown", {bubbles: true})); true`, new(bool))
	time.Sleep(1500 * time.Millisecond) // the fake microphone speaks
	s.eval(t, `document.querySelector("#voice-talk").dispatchEvent(new PointerEvent("pointerup", {bubbles: true})); true`, new(bool))
	s.waitFor(t, 20*time.Second, "the answer", `!!document.querySelector('#voice-log .msg.agent[data-done="true"]')`)
	if got := s.text(t, "#voice-log .msg.user"); got != f.Transcript {
		t.Fatalf("heard %q", got)
	}
	if got := s.text(t, "#voice-log .msg.agent"); got != f.Reply {
		t.Fatalf("answered %q", got)
	}
	s.screenshot(t, "voice")
	s.do(t, 10*time.Second, "end it", chromedp.Click("#voice-end"))
	var row map[string]any
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		l := g.Do("GET", "/api/v1/costs/calls?agent_id=talker", nil)
		if calls, _ := l.JSON["calls"].([]any); len(calls) == 1 {
			if row = calls[0].(map[string]any); row["outcome"] != "pending" {
				break
			}
		}
	}
	if row == nil || row["source"] != "voice" || row["output_tokens"] != float64(len(strings.Fields(f.Reply))) || row["input_tokens"].(float64) < 1 {
		t.Fatalf("ledger row %v", row)
	}
}
