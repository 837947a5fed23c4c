package agentdef

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newFilesForTest(t *testing.T) (*Files, string, string) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "agents")
	other := t.TempDir()
	reg := NewRegistry([]string{ws, other}, slog.New(slog.DiscardHandler))
	return NewFiles(ws, reg), ws, other
}

func TestFilesCreateEnableDisableDelete(t *testing.T) {
	f, ws, _ := newFilesForTest(t)
	src := "# helper agent\nid: helper\ndescription: helps # inline comment\nllm:\n  provider: ollama\n"
	def, err := f.Create([]byte(src), "helper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if def.File != filepath.Join(ws, "helper.yaml") || !def.IsEnabled() {
		t.Fatalf("created %+v", def)
	}
	if _, err := f.Create([]byte(src), "again.yaml"); !errors.Is(err, ErrExists) {
		t.Fatalf("second create = %v, want ErrExists", err)
	}
	def, err = f.SetEnabled("helper", false)
	if err != nil || def.IsEnabled() {
		t.Fatalf("disable = %+v, %v", def, err)
	}
	data, _ := os.ReadFile(filepath.Join(ws, "helper.yaml"))
	text := string(data)
	for _, want := range []string{"# helper agent", "# inline comment", "enabled: false", "provider: ollama"} {
		if !strings.Contains(text, want) {
			t.Errorf("rewritten file lost %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "enabled:") < strings.Index(text, "id:") || strings.Index(text, "enabled:") > strings.Index(text, "description:") {
		t.Errorf("enabled should follow id:\n%s", text)
	}
	if def, err = f.SetEnabled("helper", true); err != nil || !def.IsEnabled() {
		t.Fatalf("enable = %+v, %v", def, err)
	}
	if err := f.Delete("helper"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "helper.yaml")); !os.IsNotExist(err) {
		t.Fatalf("file still there: %v", err)
	}
	if err := f.Delete("helper"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete unknown = %v", err)
	}
}

func TestFilesRefuseOutsideAndInvalid(t *testing.T) {
	f, _, other := newFilesForTest(t)
	os.WriteFile(filepath.Join(other, "ext.yaml"), []byte("id: ext\n"), 0o644)
	f.Registry.Reload()
	var out *OutsideDirError
	if err := f.Delete("ext"); !errors.As(err, &out) || !strings.Contains(err.Error(), "ext.yaml") {
		t.Fatalf("delete outside = %v", err)
	}
	if _, err := f.Create([]byte("id: ext\n"), "x.yaml"); !errors.Is(err, ErrExists) {
		t.Fatalf("create shadowing = %v", err)
	}
	var ve *ValidationError
	if _, err := f.Create([]byte("id: bad\nmax_turns: lots\n"), "bad.yaml"); !errors.As(err, &ve) || ve.Problems[0].Key != "max_turns" || ve.Problems[0].Line != 2 {
		t.Fatalf("invalid = %#v", err)
	}
}

func TestDefinitionFromJSON(t *testing.T) {
	y, err := DefinitionFromJSON([]byte(`{"id":"j","system_prompt":"line1\nline2","channels":["webhook"],"llm":{"provider":"openai"}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(y, "j.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if d.SystemPrompt != "line1\nline2" || d.LLM.Provider != "openai" || d.Channels[0] != "webhook" {
		t.Fatalf("round trip = %+v", d)
	}
	if strings.Contains(string(y), "{") {
		t.Fatalf("flow style left:\n%s", y)
	}
	if _, err := DefinitionFromJSON([]byte(`[1]`)); err == nil {
		t.Fatal("array accepted")
	}
}
