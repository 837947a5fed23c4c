package webhook

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/agentdef"
)

const sample = `{
  "event": "opened",
  "issue": {"title": "Disk full", "number": 42, "labels": [{"name": "ops"}, {"name": "p1"}], "closed": false},
  "sender": {"login": "ana", "name": "Ana B."},
  "items": [{"text": "first"}, {"text": "second"}],
  "empty": "",
  "nothing": null,
  "conv": {"id": "t-9"}
}`

func TestLookupPathForms(t *testing.T) {
	raw := []byte(sample)
	for path, want := range map[string]string{
		"issue.title":          "Disk full",
		"$.issue.title":        "Disk full",
		"$issue.title":         "Disk full",
		"issue.number":         "42",
		"issue.closed":         "false",
		"issue.labels.1.name":  "p1",
		"issue.labels[1].name": "p1",
		"$.items[0].text":      "first",
		"items.1.text":         "second",
		"issue.labels":         `[{"name":"ops"},{"name":"p1"}]`,
		"sender":               `{"login":"ana","name":"Ana B."}`,
		"missing":              "",
		"issue.missing.deep":   "",
		"items.9.text":         "",
		"items.x":              "",
		"empty":                "",
		"nothing":              "",
		"event.more":           "",
	} {
		got, err := Lookup(raw, path)
		if err != nil || got != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	whole, _ := Lookup([]byte(`[ {"a": 1} ]`), "$")
	if whole != `[{"a":1}]` {
		t.Errorf("$ = %q", whole)
	}
	if v, _ := Lookup([]byte(`[{"a":"x"}]`), "$[0].a"); v != "x" {
		t.Errorf("$[0].a = %q", v)
	}
	for _, bad := range []string{"a..b", "a.", "items[0", "items[]"} {
		if _, err := Lookup([]byte(sample), bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestMapFallbacks(t *testing.T) {
	cases := []struct {
		name, body string
		m          *agentdef.WebhookMapping
		text, from string
	}{
		{"text_path", sample, &agentdef.WebhookMapping{TextPath: "$.issue.title"}, "Disk full", "$.issue.title"},
		{"text_path yields nothing", `{"message":"m","x":""}`, &agentdef.WebhookMapping{TextPath: "x"}, "m", "message"},
		{"text", `{"text":"t","message":"m","body":"b"}`, nil, "t", "text"},
		{"message", `{"message":"m","body":"b"}`, nil, "m", "message"},
		{"body", `{"body":"b","content":"c"}`, nil, "b", "body"},
		{"content", `{"content":"c","issue":{"title":"i"}}`, nil, "c", "content"},
		{"issue.title", `{"issue":{"title":"i"},"alert":{"title":"a"}}`, nil, "i", "issue.title"},
		{"alert.title", `{"alert":{"title":"a"}}`, nil, "a", "alert.title"},
		{"compact payload", "{\n  \"z\": 1,\n  \"a\": [1, 2]\n}", nil, `{"z":1,"a":[1,2]}`, "$"},
		{"empty text falls through", `{"text":"  ","message":"m"}`, nil, "m", "message"},
		{"object where text is expected", `{"text":{"rich":true,"parts":["a"]}}`, nil, `{"rich":true,"parts":["a"]}`, "text"},
		{"object at text_path", sample, &agentdef.WebhookMapping{TextPath: "sender"}, `{"login":"ana","name":"Ana B."}`, "sender"},
		{"non-object payload", `"just a string"`, nil, `"just a string"`, "$"},
	}
	for _, c := range cases {
		m, err := Map([]byte(c.body), c.m)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if m.Text != c.text || m.TextFrom != c.from {
			t.Errorf("%s: text %q from %q; want %q from %q", c.name, m.Text, m.TextFrom, c.text, c.from)
		}
	}
}

func TestMapIdentityFields(t *testing.T) {
	m, err := Map([]byte(sample), &agentdef.WebhookMapping{UserIDPath: "sender.login", UsernamePath: "$.sender.name",
		ThreadIDPath: "issue.number", SessionIDPath: "conv.id", IncludeRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.UserID != "ana" || m.Username != "Ana B." || m.ThreadID != "42" || m.SessionID != "t-9" || m.Text != "Disk full" {
		t.Fatalf("mapped %+v", m)
	}
	if strings.Contains(m.Raw, "\n") || !strings.HasPrefix(m.Raw, `{"event":"opened","issue":{"title":"Disk full"`) {
		t.Fatalf("raw %q", m.Raw)
	}
}

func TestMapRejectsNonJSON(t *testing.T) {
	for _, body := range []string{"", "text=hello", "{", "<xml/>"} {
		if _, err := Map([]byte(body), nil); !errors.Is(err, ErrNotJSON) {
			t.Errorf("%q: %v", body, err)
		}
	}
	if _, err := Map([]byte(`{}`), &agentdef.WebhookMapping{TextPath: "a..b"}); err == nil || !strings.Contains(err.Error(), "webhook.text_path") {
		t.Errorf("bad path: %v", err)
	}
}

func TestThreadSessionID(t *testing.T) {
	for thread, want := range map[string]string{
		"42":      "webhook-ops-42",
		"t-9.a_b": "webhook-ops-t-9.a_b",
	} {
		if got := ThreadSessionID("ops", thread); got != want {
			t.Errorf("%q: %s", thread, got)
		}
	}
	a, b := ThreadSessionID("ops", "owner/repo#12"), ThreadSessionID("ops", "owner_repo_12")
	if !strings.HasPrefix(a, "webhook-ops-owner_repo_12-") || a == b || strings.ContainsAny(a, "/#") {
		t.Errorf("unsafe thread: %s vs %s", a, b)
	}
	if got := ThreadSessionID("ops", "../../etc"); strings.Contains(got, "/") {
		t.Errorf("path: %s", got)
	}
	long := ThreadSessionID("ops", strings.Repeat("x", 500))
	if len(long) > 191 {
		t.Errorf("long: %d", len(long))
	}
}
