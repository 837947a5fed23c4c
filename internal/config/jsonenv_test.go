package config

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 43: list and map keys take a JSON value from the environment.
func TestJSONEnvSetsListAndMapKeys(t *testing.T) {
	dir := t.TempDir()
	path := write(t, filepath.Join(dir, "c.yaml"), `mcp:
  docs: {url: "https://docs.example/mcp"}
  old: {url: "https://old.example/mcp"}
costs:
  reconciliation:
    providers:
      openai: {type: openai, api_key_env: OPENAI_ADMIN_KEY}
`)
	l, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: dir, EnvConfigPath: path,
		"AGENTRY_HOOKS":                          `[{"on": ["run.*"], "url": "https://hooks.example/a", "secret_env": "HOOK_SECRET"}]`,
		"AGENTRY_REGISTRIES":                     `[{"id": "team", "base_url": "https://reg.example", "priority": 5, "auth_headers": {"Authorization": "Bearer r"}}]`,
		"AGENTRY_AUTH_KEYS":                      `[{"subject": "ci", "key_env": "CI_KEY", "role": "operator"}]`,
		"AGENTRY_MCP":                            `{"web": {"transport": "http", "url": "https://web.example/mcp"}}`,
		"AGENTRY_MCP_OLD":                        `{"url": "https://new.example/mcp"}`,
		"AGENTRY_COSTS_RECONCILIATION_PROVIDERS": `{"anthropic": {"type": "anthropic", "api_key_env": "ANTHROPIC_ADMIN_KEY"}}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Hooks) != 1 || l.Hooks[0].URL != "https://hooks.example/a" || l.Hooks[0].SecretEnv != "HOOK_SECRET" || l.Hooks[0].On[0] != "run.*" {
		t.Errorf("hooks %+v", l.Hooks)
	}
	if len(l.Registries) != 1 || l.Registries[0].ID != "team" || l.Registries[0].Priority != 5 || l.Registries[0].AuthHeaders["Authorization"] != "Bearer r" {
		t.Errorf("registries %+v", l.Registries)
	}
	if len(l.Auth.Keys) != 1 || l.Auth.Keys[0].Subject != "ci" || l.Auth.Keys[0].KeyEnv != "CI_KEY" || l.Auth.Keys[0].Role != "operator" {
		t.Errorf("auth.keys %+v", l.Auth.Keys)
	}
	// mcp: merged by id; an existing entry replaced alone.
	if len(l.MCP) != 3 || l.MCP["docs"] == nil || l.MCP["web"].(map[string]any)["url"] != "https://web.example/mcp" ||
		l.MCP["old"].(map[string]any)["url"] != "https://new.example/mcp" {
		t.Errorf("mcp %+v", l.MCP)
	}
	p := l.Costs.Reconciliation.Providers
	if len(p) != 2 || p["openai"].APIKeyEnv != "OPENAI_ADMIN_KEY" || p["anthropic"].Type != "anthropic" {
		t.Errorf("costs.reconciliation.providers %+v", p)
	}
}

// A JSON value that does not parse names the variable and the position;
// a value of the wrong shape names the variable.
func TestJSONEnvErrorsNameTheVariableAndPosition(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][2]string{
		"bad syntax":   {"AGENTRY_HOOKS", `[{"url": "https://h.example" "on": []}]`},
		"trailing":     {"AGENTRY_REGISTRIES", `[{"id": "a", "base_url": "https://r.example"}]]`},
		"second line":  {"AGENTRY_AUTH_KEYS", "[\n  {\"subject\": \"ci\",}\n]"},
		"wrong shape":  {"AGENTRY_MCP", `[1, 2]`},
		"wrong type":   {"AGENTRY_HOOKS", `[{"url": "https://h.example", "on": "run.*"}]`},
		"not an array": {"AGENTRY_HOOKS", `{"url": "x"}`},
	}
	want := map[string]string{
		"bad syntax":   "AGENTRY_HOOKS: not valid JSON at line 1, column 30",
		"trailing":     "AGENTRY_REGISTRIES: not valid JSON at line 1, column 47",
		"second line":  "AGENTRY_AUTH_KEYS: not valid JSON at line 2, column 20",
		"wrong shape":  "AGENTRY_MCP: want a JSON object",
		"wrong type":   "AGENTRY_HOOKS: cannot unmarshal",
		"not an array": "AGENTRY_HOOKS: want a JSON array",
	}
	for name, c := range cases {
		_, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: dir, c[0]: c[1]}))
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: want %q, got %v", name, want[name], err)
		}
	}
}
