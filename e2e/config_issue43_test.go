package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 43: PATCH /config refuses keys this version would ignore, naming
// every one in one error and writing nothing; GET /config shows the
// operator's token limits.
func TestConfigAPIRefusesUnsupportedKeysAndShowsLimits(t *testing.T) {
	g := startChatGateway(t, "rate_limit: {per_user_tokens_day: 50000}\nllm:\n  studio: {max_build_tokens: 9000}\n")
	file := filepath.Join(g.Workspace, "config.yaml")
	os.WriteFile(file, []byte("log:\n  level: info\n"), 0o644)

	p := g.Do("PATCH", "/api/v1/config", map[string]any{"set": map[string]any{
		"log.level": "debug", "memory.vector": true, "runtime.python_path": "/usr/bin/python3", "queue.type": "nats"}})
	msg := fmt.Sprint(p.JSON["error"])
	if p.Status != 400 || !strings.Contains(msg, "not supported yet: memory.vector, queue (") {
		t.Fatalf("patch with unsupported keys: %d %s", p.Status, p.Raw)
	}
	if data, _ := os.ReadFile(file); string(data) != "log:\n  level: info\n" {
		t.Fatalf("the refused patch changed the file: %q", data)
	}

	r := g.Do("GET", "/api/v1/config", nil)
	cfg, _ := r.JSON["config"].(map[string]any)
	if r.Status != 200 || cfg == nil {
		t.Fatalf("GET /config: %d %s", r.Status, r.Raw)
	}
	rl := cfg["rate_limit"].(map[string]any)
	costs := cfg["costs"].(map[string]any)
	studio := cfg["llm"].(map[string]any)["studio"].(map[string]any)
	for key, got := range map[string]any{"rate_limit.per_user_tokens_day": rl["per_user_tokens_day"],
		"costs.max_output_tokens_ceiling": costs["max_output_tokens_ceiling"], "costs.default_max_output_tokens": costs["default_max_output_tokens"],
		"llm.studio.max_build_tokens": studio["max_build_tokens"]} {
		if _, isNumber := got.(float64); !isNumber {
			t.Errorf("GET /config %s = %v, want the number", key, got)
		}
	}
}
