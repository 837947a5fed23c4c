package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// installExamplePlugin builds dev/exampleplugin into root/greeter with its
// plugin.yaml.
func installExamplePlugin(t *testing.T, root string) {
	t.Helper()
	dir := filepath.Join(root, "greeter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "greeter"), "github.com/agentryhq/agentry/dev/exampleplugin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the example plugin: %v\n%s", err, out)
	}
	manifest, err := os.ReadFile("../dev/exampleplugin/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExamplePluginToolInChatAndTaskRun: the example plugin in plugin_dirs,
// configured by plugins_config.greeter, is listed by GET /plugins and its
// tool is called by an agent in chat and in a durable task run; a plugin
// whose manifest escapes its folder is listed as invalid and not started.
func TestExamplePluginToolInChatAndTaskRun(t *testing.T) {
	plugins := t.TempDir()
	installExamplePlugin(t, plugins)
	bad := filepath.Join(plugins, "escaper")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "plugin.yaml"), []byte("id: escaper\nversion: 0.1.0\nexecutable: ../greeter/greeter\n"), 0o644)

	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"greeter-user.yaml": "id: greeter-user\nsystem_prompt: Use tools.\nmcp: [greeter]\n"},
		Config: fmt.Sprintf("plugin_dirs: [%q]\nplugins_config:\n  greeter: {greeting: Ahoy}\n", plugins),
	})
	deadline := time.Now().Add(60 * time.Second)
	var list gatewaytest.Response
	for {
		list = g.Do("GET", "/api/v1/plugins", nil)
		if list.Status == 200 && strings.Contains(string(list.Raw), `"status":"running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin is not running: %d %s", list.Status, list.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(string(list.Raw), `"offered":["greet"]`) || !strings.Contains(string(list.Raw), "escapes the plugin folder (..)") {
		t.Fatalf("plugins: %s", list.Raw)
	}
	if r := g.DoAs("not-a-key-at-all-000000", "GET", "/api/v1/plugins", nil); r.Status != 401 && r.Status != 403 {
		t.Fatalf("unauthenticated list: %d", r.Status)
	}

	g.Fake.Script(
		fakellm.Rule{Contains: "greet Ada", Times: 1, ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("mcp__greeter__greet", map[string]any{"name": "Ada"})}},
		fakellm.Rule{Contains: "Ahoy, Ada!", Times: 1, Reply: "I said ahoy to Ada."},
		fakellm.Rule{Contains: "Greet job", Times: 1, ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("mcp__greeter__greet", map[string]any{"name": "Bob"})}},
		fakellm.Rule{Contains: "Ahoy, Bob!", Times: 1, Reply: "Greeted Bob."},
	)
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "greeter-user", "text": "greet Ada please"})
	if r.Status != 200 || r.JSON["reply"] != "I said ahoy to Ada." {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
	id := wbCreateTask(t, g, map[string]any{"title": "Greet job", "agent_id": "greeter-user"})
	rr := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, rr, 202, "start run")
	run := wbWaitRun(t, g, id, wbID(t, rr), 60*time.Second, "finished", "failed")
	if run["status"] != "finished" || run["reply"] != "Greeted Bob." {
		t.Fatalf("run %v", run)
	}

	// Hot reload: the folder goes, a rescan stops it.
	if err := os.RemoveAll(filepath.Join(plugins, "greeter")); err != nil {
		t.Fatal(err)
	}
	r = g.Do("POST", "/api/v1/plugins/rescan", nil)
	if r.Status != 200 || strings.Contains(string(r.Raw), `"id":"greeter"`) {
		t.Fatalf("rescan after removal: %d %s", r.Status, r.Raw)
	}
}
