package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

func TestConfigAPI(t *testing.T) {
	g := startChatGateway(t, "channels:\n  webhook: {enabled: true, url: 'https://hooks.example/x', secret: whsec-123}\n")
	file := filepath.Join(g.Workspace, "config.yaml")
	os.WriteFile(file, []byte("# my settings\nlog:\n  level: info # keep me\nfuture_section: {x: 1}\n"), 0o644)

	r := g.Do("GET", "/api/v1/config", nil)
	if r.Status != 200 || strings.Contains(string(r.Raw), "whsec-123") || strings.Contains(string(r.Raw), gatewaytest.TestAPIKey) {
		t.Fatalf("secrets visible or error: %d %s", r.Status, r.Raw)
	}
	if !strings.Contains(string(r.Raw), `"********"`) {
		t.Fatal("redaction marker missing")
	}
	if r := g.DoAs(viewerKey, "GET", "/api/v1/config", nil); r.Status != 403 {
		t.Fatalf("viewer read config: %d", r.Status)
	}

	p := g.Do("PATCH", "/api/v1/config", map[string]any{"set": map[string]any{"log.level": "debug", "channels.webhook.secret": "new-secret", "server.api_key": "********"}})
	if p.Status != 200 || p.JSON["restart_required"] != true {
		t.Fatalf("patch: %d %s", p.Status, p.Raw)
	}
	if strings.Contains(string(p.Raw), "new-secret") {
		t.Fatal("patched secret echoed")
	}
	changed := p.JSON["changed"].([]any)
	if len(changed) != 2 {
		t.Fatalf("changed %v (the redacted placeholder must not count)", changed)
	}
	data, _ := os.ReadFile(file)
	text := string(data)
	for _, want := range []string{"# my settings", "keep me", "future_section", "level: debug", "secret: new-secret"} {
		if !strings.Contains(text, want) {
			t.Errorf("file lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "api_key") {
		t.Errorf("the redacted placeholder was written:\n%s", text)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	for _, bad := range []map[string]any{
		{"set": map[string]any{"log.level": "loud"}},
		{"set": map[string]any{"server.port": "many"}},
		{"set": map[string]any{"costs.pricing.a/b.input_per_mtok": -1}},
		{"set": map[string]any{}},
		{"set": map[string]any{"log..level": "debug"}},
	} {
		if r := g.Do("PATCH", "/api/v1/config", bad); r.Status != 400 {
			t.Errorf("%v: %d %s", bad, r.Status, r.Raw)
		}
	}
	after, _ := os.ReadFile(file)
	if string(after) != text {
		t.Fatal("a refused patch changed the file")
	}
}

// A budget key changed through PATCH /config is applied at once, and
// GET /config shows the new value (it showed the value loaded at start);
// a key that needs a restart keeps showing the running value.
func TestConfigShowsLiveChanges(t *testing.T) {
	g := startChatGateway(t, "costs: {daily_budget_usd: 10}\nlog: {level: info}\n")
	costs := func() map[string]any {
		r := g.Do("GET", "/api/v1/config", nil)
		if r.Status != 200 {
			t.Fatalf("get config: %d %s", r.Status, r.Raw)
		}
		return r.JSON["config"].(map[string]any)
	}
	if got := costs()["costs"].(map[string]any)["daily_budget_usd"]; got != float64(10) {
		t.Fatalf("daily budget at start: %v", got)
	}
	p := g.Do("PATCH", "/api/v1/config", map[string]any{"set": map[string]any{"costs.daily_budget_usd": 75, "log.level": "debug"}})
	if p.Status != 200 || fmt.Sprint(p.JSON["applied"]) != "[costs.daily_budget_usd]" {
		t.Fatalf("patch: %d %s", p.Status, p.Raw)
	}
	cfg := costs()
	if got := cfg["costs"].(map[string]any)["daily_budget_usd"]; got != float64(75) {
		t.Fatalf("GET /config after a live change shows daily_budget_usd %v, want 75", got)
	}
	if got := cfg["log"].(map[string]any)["level"]; got != "info" {
		t.Fatalf("log.level %v: a change that needs a restart is not running yet", got)
	}
}
