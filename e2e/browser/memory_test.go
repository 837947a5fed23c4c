package browser

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// The Memory page lists an agent's memories of the signed-in subject,
// filters them by user and forgets one (issue 45).
func TestConsoleMemory(t *testing.T) {
	chrome := testenv.Chromium(t)
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"keeper.yaml": "id: keeper\nmemory: true\nsystem_prompt: You remember.\n",
	}})
	var ids []int64
	for _, m := range []struct{ user, text string }{{"ana", "ana likes teal"}, {"bea", "bea runs marathons"}} {
		r := g.Do("POST", "/api/v1/memory/entries", map[string]any{"agent_id": "keeper", "user_id": m.user, "text": m.text})
		if r.Status != 201 {
			t.Fatalf("write: %d %s", r.Status, r.Raw)
		}
		ids = append(ids, int64(r.JSON["id"].(float64)))
	}
	s := newSession(t, chrome, g.URL())
	row := func(id int64) string { return fmt.Sprintf(`#memories tr[data-memory="%d"]`, id) }
	s.do(t, 30*time.Second, "sign in and open the memory page",
		chromedp.Navigate(g.URL()+"/#/memory"), chromedp.WaitVisible("#credential"),
		chromedp.SendKeys("#credential", gatewaytest.TestAPIKey), chromedp.Click("#signin-form button"),
		chromedp.WaitVisible(row(ids[0])), chromedp.WaitVisible(row(ids[1])))
	if txt := s.text(t, row(ids[0])+" td.memory-text"); txt != "ana likes teal" {
		t.Fatalf("row text %q", txt)
	}
	s.screenshot(t, "memory")
	s.do(t, 20*time.Second, "filter to bea",
		chromedp.SendKeys("#memory-user", "bea\n"), chromedp.WaitNotPresent(row(ids[0])), chromedp.WaitVisible(row(ids[1])))
	s.do(t, 20*time.Second, "forget bea's memory",
		chromedp.Click(fmt.Sprintf(`button[data-memory="%d"]`, ids[1])), chromedp.WaitVisible("#memory-empty"))
	if r := g.Do("GET", fmt.Sprintf("/api/v1/memory/entries/%d", ids[1]), nil); r.Status != 404 {
		t.Fatalf("the forgotten memory: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("GET", "/api/v1/memory/entries?agent_id=keeper", nil); !strings.Contains(string(r.Raw), "ana likes teal") {
		t.Fatalf("ana's memory went too: %s", r.Raw)
	}
}
