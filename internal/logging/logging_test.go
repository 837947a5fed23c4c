package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

func TestLevelFormatAndFile(t *testing.T) {
	var buf bytes.Buffer
	log, closer, err := New(config.LogConfig{Level: "warn", Format: "json"}, config.Workspace{Root: t.TempDir()}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	log.Info("hidden")
	log.Warn("shown", "k", "v")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want only the warning, got %q", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec["msg"] != "shown" || rec["k"] != "v" {
		t.Fatalf("json record %q %v", lines[0], err)
	}

	ws := config.Workspace{Root: t.TempDir()}
	log, closer, err = New(config.LogConfig{Level: "debug", Format: "console", File: "gateway.log"}, ws, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("to the file")
	closer.Close()
	data, _ := os.ReadFile(filepath.Join(ws.LogsDir(), "gateway.log"))
	if !strings.Contains(string(data), "to the file") {
		t.Fatalf("file log %q", data)
	}
	if _, _, err := New(config.LogConfig{Level: "loud"}, ws, &buf); err == nil {
		t.Fatal("bad level accepted")
	}
}
