package agentdef

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Agent definitions are checked fully at load (issue 18 item 9): a webhook
// mapping path that cannot parse is refused then, not on every call.
func TestWebhookMappingPathsCheckedAtLoad(t *testing.T) {
	for _, path := range []string{"a..b", "a.", "items[0", "x[]"} {
		_, err := Parse([]byte("id: hook\ntrigger: webhook\nwebhook:\n  text_path: \""+path+"\"\n"), "hook.yaml")
		if err == nil || !strings.Contains(err.Error(), "webhook.text_path") {
			t.Errorf("%q: %v", path, err)
		}
	}
	if _, err := Parse([]byte("id: hook\ntrigger: webhook\nwebhook: {text_path: \"$.issue.title\", user_id_path: \"items[0].id\"}\n"), "hook.yaml"); err != nil {
		t.Fatal(err)
	}
}

// The same file reached twice (the agents folder listed again in
// agent_dirs, or through a symlinked folder) is one definition, not a
// duplicate of itself.
func TestSameFileListedTwiceIsOneDefinition(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("id: a\n"), 0o644)
	link := filepath.Join(t.TempDir(), "agents-link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry([]string{dir, dir + "/", filepath.Join(dir, "..", filepath.Base(dir)), link}, nil)
	if errs := r.LoadErrors(); len(errs) != 0 {
		t.Fatalf("load errors: %v", errs)
	}
	if n := len(r.List()); n != 1 {
		t.Fatalf("%d agents", n)
	}
	if errs := r.Reload(); len(errs) != 0 {
		t.Fatalf("reload errors: %v", errs)
	}
}
