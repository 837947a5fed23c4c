package webhook

import (
	"testing"

	"github.com/agentryhq/agentry/internal/agentdef"
)

// FuzzMap: any payload and mapping path maps or fails with an error; a
// mapped payload always has text.
func FuzzMap(f *testing.F) {
	f.Add([]byte(`{"issue":{"title":"t"},"user":{"id":7}}`), "issue.title")
	f.Add([]byte(`[{"text":"x"}]`), "$[0].text")
	f.Add([]byte(`{"a":null}`), "a..b")
	f.Add([]byte(`"just a string"`), "$")
	f.Add([]byte(`not json`), "x")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		m, err := Map(body, &agentdef.WebhookMapping{TextPath: path, UserIDPath: path})
		if err == nil && m.Text == "" {
			t.Fatalf("mapped without text: %q %q", body, path)
		}
	})
}
