package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The editor both sides use: untouched keys, order and comments survive;
// a missing file starts empty with mode 0600; check sees the result before
// anything is written.
func TestEditFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config.yaml")
	set := func(root *yaml.Node) error {
		if _, err := SetPath(root, []string{"cli", "active_context"}, StringNode("prod")); err != nil {
			return err
		}
		_, err := SetPath(root, []string{"server", "port"}, ValueNode(9000))
		return err
	}
	if err := EditFile(path, set, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("new file: %v %v", st, err)
	}
	if err := os.WriteFile(path, []byte("# top\nlog:\n  level: info # keep me\ncli:\nserver:\n  port: 1\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := EditFile(path, set, nil); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	want := "# top\nlog:\n  level: info # keep me\ncli:\n  active_context: prod\nserver:\n  port: 9000\n"
	if string(data) != want {
		t.Fatalf("edited:\n%s\nwant:\n%s", data, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	refused := errors.New("no")
	err := EditFile(path, func(root *yaml.Node) error { DeletePath(root, []string{"log", "level"}); return nil },
		func([]byte) error { return refused })
	if !errors.Is(err, refused) {
		t.Fatalf("check: %v", err)
	}
	if now, _ := os.ReadFile(path); string(now) != want {
		t.Fatal("a refused edit was written")
	}
	if err := EditFile(path, func(root *yaml.Node) error {
		if !DeletePath(root, []string{"log", "level"}) || DeletePath(root, []string{"log", "level"}) || DeletePath(root, []string{"nope", "x"}) {
			t.Error("DeletePath reports")
		}
		_, err := SetPath(root, []string{"cli", "active_context", "x"}, StringNode("y"))
		if err == nil || !strings.Contains(err.Error(), "not a mapping") {
			t.Errorf("set below a scalar: %v", err)
		}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("- a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := EditFile(path, set, nil); err == nil || !strings.Contains(err.Error(), "top level is not a mapping") {
		t.Fatalf("a list document: %v", err)
	}
}

func TestSetKeysReportsChanges(t *testing.T) {
	out, changed, err := SetKeys([]byte("# c\nlog:\n  level: info\n"), map[string]any{"log.level": "info", "server.port": 9000})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(changed, ",") != "server.port" || !strings.Contains(string(out), "port: 9000") {
		t.Fatalf("changed %v\n%s", changed, out)
	}
	if _, _, err := SetKeys([]byte("- a\n"), map[string]any{"a": 1}); err == nil || err.Error() != "current config: the document is not a mapping" {
		t.Fatalf("list document: %v", err)
	}
}
