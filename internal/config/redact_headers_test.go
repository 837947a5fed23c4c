package config

import (
	"testing"
)

// Header values are secrets (issue 18 item 2): GET /config shows the names
// only, and a body written back as read keeps the values.
func TestHeaderValuesAreRedactedAndKeptOnWriteBack(t *testing.T) {
	tree := Redact(map[string]any{"channels": map[string]any{"webhook": map[string]any{
		"headers": "Authorization: Bearer tok-123\nX-Team: ops"}}}).(map[string]any)
	got := tree["channels"].(map[string]any)["webhook"].(map[string]any)["headers"].(string)
	if got != "Authorization: ********\nX-Team: ********" {
		t.Fatalf("redacted headers %q", got)
	}
	doc := []byte("channels:\n  webhook:\n    headers: \"Authorization: Bearer tok-123\\nX-Team: ops\"\n")
	out, _, err := SetKeys(doc, map[string]any{"channels.webhook.headers": got + "\nX-New: 1"})
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := Parse(out, "merged.yaml", &c); err != nil || c.Channels.Webhook.Headers != "Authorization: Bearer tok-123\nX-Team: ops\nX-New: 1" {
		t.Fatalf("merged document (%v):\n%s", err, out)
	}
	if _, _, err := SetKeys(doc, map[string]any{"channels.webhook.headers": "X-Other: ********"}); err == nil {
		t.Fatal("a redacted value without an earlier one was accepted")
	}
}
