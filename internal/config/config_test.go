package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func chdir(t *testing.T, dir string) {
	t.Helper()
	t.Chdir(dir)
}

func write(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultsWithoutAnyFile(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)
	l, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: filepath.Join(dir, "ws")}))
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "" {
		t.Fatalf("expected no config file, got %s", l.Path)
	}
	if l.Server.Host != "127.0.0.1" || l.Server.Port != 18789 {
		t.Fatalf("defaults: %s:%d", l.Server.Host, l.Server.Port)
	}
	if l.LLM.DefaultProvider != "ollama" || l.LLM.Providers["ollama"].BaseURL != "http://127.0.0.1:11434" {
		t.Fatalf("default provider: %+v", l.LLM)
	}
	if l.Workspace.Root != filepath.Join(dir, "ws") {
		t.Fatalf("workspace %s", l.Workspace.Root)
	}
	// The console is on for a loopback gateway unless asked otherwise; an
	// unset AGENTRY_SERVER_GUI must leave server.gui unset, not false.
	if l.Server.GUI != nil || !l.Server.GUIEnabled() {
		t.Fatalf("server.gui %v, console enabled %v; want unset and on", l.Server.GUI, l.Server.GUIEnabled())
	}
}

func TestGUIEnvOverrideStillTurnsTheConsoleOff(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)
	l, err := Load(context.Background(), MapEnv(map[string]string{
		EnvWorkspace:         filepath.Join(dir, "ws"),
		"AGENTRY_SERVER_GUI": "false",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if l.Server.GUIEnabled() {
		t.Fatal("AGENTRY_SERVER_GUI=false left the console on")
	}
}

func TestAdaptiveProcsIsOnUnlessTurnedOff(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)
	for env, want := range map[string]bool{"": true, "false": false, "true": true} {
		vars := map[string]string{EnvWorkspace: filepath.Join(dir, "ws")}
		if env != "" {
			vars["AGENTRY_SERVER_ADAPTIVE_PROCS"] = env
		}
		l, err := Load(context.Background(), MapEnv(vars))
		if err != nil {
			t.Fatal(err)
		}
		if l.Server.AdaptiveProcs != want {
			t.Errorf("AGENTRY_SERVER_ADAPTIVE_PROCS=%q: adaptive_procs %v, want %v", env, l.Server.AdaptiveProcs, want)
		}
	}
}

func TestSearchOrder(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	cwd := filepath.Join(dir, "cwd")
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	os.MkdirAll(cwd, 0o755)
	chdir(t, cwd)
	legacy := write(t, filepath.Join(home, "agentry", "config.yaml"), "server: {port: 1003}\n")
	wsFile := write(t, filepath.Join(ws, "config.yaml"), "server: {port: 1002}\n")
	cwdFile := write(t, filepath.Join(cwd, "config.yaml"), "server: {port: 1001}\n")
	explicit := write(t, filepath.Join(dir, "explicit.yaml"), "server: {port: 1000}\n")

	env := map[string]string{EnvWorkspace: ws, EnvConfigPath: explicit}
	steps := []struct {
		remove string
		want   string
		port   int
	}{
		{"", explicit, 1000},
		{"env", cwdFile, 1001},
		{cwdFile, wsFile, 1002},
		{wsFile, legacy, 1003},
		{legacy, "", 18789},
	}
	for _, s := range steps {
		if s.remove == "env" {
			delete(env, EnvConfigPath)
		} else if s.remove != "" {
			os.Remove(s.remove)
		}
		l, err := Load(context.Background(), MapEnv(env))
		if err != nil {
			t.Fatal(err)
		}
		if l.Path != s.want || l.Server.Port != s.port {
			t.Fatalf("after removing %q: got %s port %d, want %s port %d", s.remove, l.Path, l.Server.Port, s.want, s.port)
		}
	}
}

func TestExplicitConfigPathMustExist(t *testing.T) {
	_, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: t.TempDir(), EnvConfigPath: "/nonexistent/agentry.yaml"}))
	if err == nil || !strings.Contains(err.Error(), EnvConfigPath) {
		t.Fatalf("want error naming %s, got %v", EnvConfigPath, err)
	}
}

func TestEnvOverridesNestedKeys(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)
	write(t, filepath.Join(dir, "config.yaml"), `
server:
  port: 1234
llm:
  providers:
    local-vllm: {type: openai, base_url: "http://127.0.0.1:8000/v1"}
costs:
  pricing:
    openai/gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6}
`)
	env := MapEnv(map[string]string{
		EnvWorkspace:                                              filepath.Join(dir, "ws"),
		"AGENTRY_SERVER_PORT":                                     "19000",
		"AGENTRY_LOG_LEVEL":                                       "DEBUG",
		"AGENTRY_COSTS_DAILY_BUDGET_USD":                          "5",
		"AGENTRY_COSTS_RESERVATION_TTL":                           "2m",
		"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":                    "false",
		"AGENTRY_SERVER_CORS_ALLOW_ORIGINS":                       "https://a.example,https://b.example",
		"AGENTRY_LLM_PROVIDERS_LOCAL_VLLM_BASE_URL":               "http://127.0.0.1:9000/v1",
		"AGENTRY_COSTS_PRICING_OPENAI_GPT_4O_MINI_INPUT_PER_MTOK": "0.2",
		EnvUpdateManifest:                                         "https://updates.example/manifest.json",
	})
	l, err := Load(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if l.Server.Port != 19000 {
		t.Errorf("port %d", l.Server.Port)
	}
	if l.Log.Level != "debug" {
		t.Errorf("level %q", l.Log.Level)
	}
	if l.Costs.DailyBudgetUSD != 5 || l.Costs.ReservationTTL != 2*time.Minute {
		t.Errorf("costs %+v", l.Costs)
	}
	if l.Temporal.Embedded.UIEnabled {
		t.Errorf("ui_enabled should be overridden to false")
	}
	if !reflect.DeepEqual(l.Server.CORS.AllowOrigins, []string{"https://a.example", "https://b.example"}) {
		t.Errorf("cors %v", l.Server.CORS.AllowOrigins)
	}
	if got := l.LLM.Providers["local-vllm"].BaseURL; got != "http://127.0.0.1:9000/v1" {
		t.Errorf("provider base_url %q", got)
	}
	if got := l.Costs.Pricing["openai/gpt-4o-mini"].InputPerMTok; got != 0.2 {
		t.Errorf("pricing override %v", got)
	}
	if l.Updates.ManifestURL != "https://updates.example/manifest.json" {
		t.Errorf("manifest %q", l.Updates.ManifestURL)
	}
}

func TestUnparsableOverrideNamesTheVariable(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{"AGENTRY_SERVER_PORT", "nineteen"},
		{"AGENTRY_COSTS_RESERVATION_TTL", "soon"},
		{"AGENTRY_LLM_PROVIDERS_OLLAMA_MAX_TOKENS_PER_MINUTE", "lots"},
	} {
		_, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: t.TempDir(), tc.key: tc.val}))
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.val) {
			t.Errorf("%s=%s: want error naming the variable, got %v", tc.key, tc.val, err)
		}
	}
}

func TestMalformedYAMLNamesFileLineAndKey(t *testing.T) {
	dir := t.TempDir()
	path := write(t, filepath.Join(dir, "bad.yaml"), "server:\n  host: 127.0.0.1\n  port: eighteen\n")
	_, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: dir, EnvConfigPath: path}))
	if err == nil {
		t.Fatal("expected an error")
	}
	for _, want := range []string{path + ":3", "server.port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	path = write(t, filepath.Join(dir, "syntax.yaml"), "server:\n  port: [1\n")
	_, err = Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: dir, EnvConfigPath: path}))
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line") {
		t.Errorf("syntax error should name file and line: %v", err)
	}
}

func TestRefusesBadValues(t *testing.T) {
	cases := map[string]string{
		"auth:\n  mode: magic\n": "auth.mode",
		"auth:\n  mode: jwt\n":   "auth.jwt.secret",
		"costs:\n  pricing:\n    openai/gpt: {input_per_mtok: -1}\n":                           "costs.pricing.openai/gpt",
		"costs:\n  pricing:\n    openai/gpt: {input_per_mtok: 1, effective_date: yesterday}\n": "effective_date",
		"log:\n  level: loud\n":                     "log.level",
		"llm:\n  providers:\n    x: {type: grpc}\n": "llm.providers.x.type",
	}
	for body, want := range cases {
		dir := t.TempDir()
		path := write(t, filepath.Join(dir, "c.yaml"), body)
		_, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: dir, EnvConfigPath: path}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want error naming %q, got %v", body, want, err)
		}
	}
}

func TestUnknownKeysAreKept(t *testing.T) {
	var cfg Config = Defaults()
	err := Parse([]byte("mcp:\n  hot_size: 20\nserver:\n  experimental: true\nfuture_key: {a: 1}\n"), "c.yaml", &cfg)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := ToTree(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tree["mcp"].(map[string]any)["hot_size"] != 20 {
		t.Errorf("mcp.hot_size lost: %v", tree["mcp"])
	}
	if tree["server"].(map[string]any)["experimental"] != true {
		t.Errorf("server.experimental lost: %v", tree["server"])
	}
	if _, ok := tree["future_key"]; !ok {
		t.Errorf("future_key lost")
	}
}

func TestRedaction(t *testing.T) {
	cfg := Defaults()
	cfg.Server.APIKey = "sk-live-123"
	cfg.Channels.Webhook.Secret = "whsec"
	cfg.Storage.DSN = "postgres://u:pw@db/agentry"
	cfg.LLM.Providers["openai"] = ProviderConfig{Type: "openai", APIKey: "sk-openai", APIKeyEnv: "OPENAI_API_KEY"}
	cfg.Auth.Keys = []APIKeyConfig{{Subject: "bob", Key: "bobs-key", Role: "viewer"}}
	tree, err := cfg.RedactedTree()
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(flatten(tree, ""), "\n")
	for _, secret := range []string{"sk-live-123", "whsec", "pw@db", "sk-openai", "bobs-key"} {
		if strings.Contains(flat, secret) {
			t.Errorf("secret %q visible in %s", secret, flat)
		}
	}
	for _, visible := range []string{"OPENAI_API_KEY", "credentials.provider=local", "server.host=127.0.0.1"} {
		if !strings.Contains(flat, visible) {
			t.Errorf("%q should stay visible", visible)
		}
	}
	for _, k := range []string{"api_key", "github_token", "DB_PASSWORD", "client_secret", "credential", "llm.providers.x.api_key"} {
		if !IsSecretKey(k) {
			t.Errorf("%s should be secret", k)
		}
	}
	for _, k := range []string{"host", "api_key_env", "secret_env", "provider"} {
		if IsSecretKey(k) {
			t.Errorf("%s should not be secret", k)
		}
	}
}

func flatten(v any, prefix string) []string {
	var out []string
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = append(out, flatten(val, p)...)
		}
	case []any:
		for _, val := range t {
			out = append(out, flatten(val, prefix)...)
		}
	default:
		out = append(out, prefix+"="+fmt.Sprint(v))
	}
	return out
}

// TestEnvTagsMatchYAMLKeys keeps the two tags of every field in step, so
// that AGENTRY_<KEY_PATH> always addresses the documented key.
func TestEnvTagsMatchYAMLKeys(t *testing.T) {
	var walk func(rt reflect.Type, path string)
	walk = func(rt reflect.Type, path string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			yamlKey := strings.Split(f.Tag.Get("yaml"), ",")[0]
			envTag := strings.TrimSuffix(f.Tag.Get("env"), ",noinit")
			if yamlKey == "" || envTag == "" {
				continue
			}
			want := strings.ToUpper(yamlKey)
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				if envTag != ", prefix="+want+"_" {
					t.Errorf("%s%s: env tag %q, want %q", path, yamlKey, envTag, ", prefix="+want+"_")
				}
				walk(f.Type, path+yamlKey+".")
				continue
			}
			if envTag != want {
				t.Errorf("%s%s: env tag %q, want %q", path, yamlKey, envTag, want)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

func TestRelativeDirsResolveFromStartDir(t *testing.T) {
	dir := t.TempDir()
	chdir(t, dir)
	write(t, filepath.Join(dir, "config.yaml"), "agent_dirs: [my-agents, /abs/agents]\n")
	l, err := Load(context.Background(), MapEnv(map[string]string{EnvWorkspace: filepath.Join(dir, "ws")}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "my-agents"), "/abs/agents"}
	if !reflect.DeepEqual(l.AgentDirs, want) {
		t.Fatalf("agent_dirs %v, want %v", l.AgentDirs, want)
	}
}
