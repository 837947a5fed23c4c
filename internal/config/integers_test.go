package config

import (
	"strings"
	"testing"
)

// Integer keys take integers only (issue 18 item 8): yaml.v3 alone
// truncates port: 1.5 to 1.
func TestIntegerKeysRefuseFractions(t *testing.T) {
	for _, doc := range []string{"server: {port: 1.5}", "server: {port: 1e3}", "llm: {providers: {p: {type: openai, max_retries: 2.5}}}"} {
		c := Defaults()
		if err := Parse([]byte(doc), "c.yaml", &c); err == nil || !strings.Contains(err.Error(), "not an integer") {
			t.Errorf("%s: %v", doc, err)
		}
	}
	c := Defaults()
	if err := Parse([]byte("server: {port: 8080, shutdown_timeout: 5s}\nruntime: {tool_timeout: 30s}"), "c.yaml", &c); err != nil || c.Server.Port != 8080 {
		t.Fatalf("integers and durations: %v", err)
	}
}
