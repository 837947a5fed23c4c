package agentry

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

// Issue 43: doctor lists the keys this version would ignore, every one of
// them, as a failing check of its own.
func TestDoctorListsUnsupportedKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("memory: {vector: true}\nqueue: {type: nats}\ncli: {gateway_url: 'http://127.0.0.1:1'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := config.MapEnv(map[string]string{"AGENTRY_WORKSPACE": dir, "AGENTRY_CONFIG_PATH": path, "HOME": dir})
	var out, errb bytes.Buffer
	a := &App{Version: "test", Env: env, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	code := a.Run(context.Background(), []string{"doctor"})
	if code != 1 {
		t.Fatalf("doctor exit %d, want 1; %s %s", code, out.String(), errb.String())
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "unsupported keys") {
			line = l
		}
	}
	if !strings.Contains(line, "fail") || !strings.Contains(line, "memory.vector, queue: not supported yet") {
		t.Fatalf("doctor's unsupported keys row: %q\n%s", line, out.String())
	}
}
