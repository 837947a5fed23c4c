package agentry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

func TestIsLocal(t *testing.T) {
	for url, want := range map[string]bool{
		"http://127.0.0.1:18789":      true,
		"http://127.3.4.5:1":          true,
		"http://localhost:18789":      true,
		"http://LOCALHOST":            true,
		"http://api.localhost:80":     true,
		"http://[::1]:18789":          true,
		"unix:///run/agentry.sock":    true,
		"https://gateway.example.com": false,
		"http://10.0.0.5:18789":       false,
		"http://192.168.1.2":          false,
		"http://localhost.evil.com":   false,
		"http://0.0.0.0:18789":        false,
	} {
		if got := IsLocal(url); got != want {
			t.Errorf("IsLocal(%q) = %v, want %v", url, got, want)
		}
	}
}

func loaded(t *testing.T) *config.Loaded {
	t.Helper()
	cfg := config.Defaults()
	cfg.Server.Port = 19999
	cfg.CLI.Contexts = map[string]config.ContextConfig{
		"prod":  {GatewayURL: "https://prod.example.com", APIKey: "prod-key"},
		"nokey": {GatewayURL: "https://nokey.example.com"},
		"lab":   {GatewayURL: "http://127.0.0.1:20000"},
	}
	return &config.Loaded{Config: cfg, Workspace: config.Workspace{Root: t.TempDir()}}
}

func TestResolvePrecedence(t *testing.T) {
	cfg := loaded(t)
	env := map[string]string{}
	in := func() Inputs { return Inputs{Env: config.MapEnv(env), Config: cfg} }

	// Local configuration: server.port, no key yet.
	tg, err := Resolve(in())
	if err != nil || tg.URL != "http://127.0.0.1:19999" || !tg.Local || tg.APIKey != "" {
		t.Fatalf("local = %+v, %v", tg, err)
	}
	// The workspace's generated key is used for the local gateway.
	os.MkdirAll(cfg.Workspace.CredentialsDir(), 0o700)
	os.WriteFile(cfg.Workspace.APIKeyFile(), []byte("generated-key\n"), 0o600)
	tg, _ = Resolve(in())
	if tg.APIKey != "generated-key" || tg.KeyFrom != cfg.Workspace.APIKeyFile() {
		t.Fatalf("key file = %+v", tg)
	}
	// server.api_key beats the file; cli.gateway_url beats server.port.
	cfg.Server.APIKey = "configured-key"
	cfg.CLI.GatewayURL = "http://localhost:18000/"
	tg, _ = Resolve(in())
	if tg.APIKey != "configured-key" || tg.URL != "http://localhost:18000" || tg.URLFrom != "cli.gateway_url" {
		t.Fatalf("config = %+v", tg)
	}
	// The active context beats the local configuration.
	cfg.CLI.ActiveContext = "prod"
	tg, _ = Resolve(in())
	if tg.URL != "https://prod.example.com" || tg.APIKey != "prod-key" || tg.Local || tg.Context != "prod" {
		t.Fatalf("active context = %+v", tg)
	}
	// A remote context without a key never gets the local key.
	cfg.CLI.ActiveContext = "nokey"
	tg, _ = Resolve(in())
	if tg.APIKey != "" || tg.KeyFrom != "" {
		t.Fatalf("local key leaked to a remote context: %+v", tg)
	}
	// AGENTRY_CONTEXT beats cli.active_context; env beats the context.
	env[EnvContext] = "lab"
	tg, _ = Resolve(in())
	if tg.URL != "http://127.0.0.1:20000" || tg.ContextFrom != EnvContext || tg.APIKey != "configured-key" {
		t.Fatalf("env context = %+v", tg)
	}
	env[EnvGateway] = "http://127.0.0.1:30000"
	env[EnvAPIKey] = "env-key"
	tg, _ = Resolve(in())
	if tg.URL != "http://127.0.0.1:30000" || tg.APIKey != "env-key" || tg.URLFrom != EnvGateway {
		t.Fatalf("env = %+v", tg)
	}
	// Flags beat everything.
	i := in()
	i.FlagGateway, i.FlagAPIKey, i.FlagContext = "https://flag.example.com", "flag-key", "prod"
	tg, _ = Resolve(i)
	if tg.URL != "https://flag.example.com" || tg.APIKey != "flag-key" || tg.Context != "prod" || tg.Local {
		t.Fatalf("flags = %+v", tg)
	}
}

func TestResolveErrors(t *testing.T) {
	cfg := loaded(t)
	_, err := Resolve(Inputs{FlagContext: "staging", Env: config.MapEnv(nil), Config: cfg})
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "lab, nokey, prod") {
		t.Fatalf("unknown context = %v", err)
	}
	_, err = Resolve(Inputs{FlagGateway: "ftp://x", Env: config.MapEnv(nil), Config: cfg})
	if !errors.As(err, &ue) {
		t.Fatalf("bad URL = %v", err)
	}
	// A broken local config only matters when it is needed.
	broken := errors.New("config.yaml: line 3: bad")
	if _, err := Resolve(Inputs{Env: config.MapEnv(nil), ConfigErr: broken}); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("broken config = %v", err)
	}
	tg, err := Resolve(Inputs{FlagGateway: "https://x.example.com", Env: config.MapEnv(nil), ConfigErr: broken})
	if err != nil || tg.URL != "https://x.example.com" {
		t.Fatalf("flag with broken config = %+v, %v", tg, err)
	}
}

func TestLocalURLWildcardHost(t *testing.T) {
	cfg := config.Defaults()
	cfg.Server.Host, cfg.Server.Port = "0.0.0.0", 1234
	if got := LocalURL(&cfg); got != "http://127.0.0.1:1234" {
		t.Fatalf("LocalURL = %s", got)
	}
	cfg.Server.Host = "::1"
	if got := LocalURL(&cfg); got != "http://[::1]:1234" {
		t.Fatalf("LocalURL = %s", got)
	}
}

func TestParseSets(t *testing.T) {
	got, err := parseSets([]string{"url=https://x/y?a=b", "retries=3", "enabled=true", "headers=X-A: 1", `list=["a","b"]`})
	if err != nil {
		t.Fatal(err)
	}
	if got["url"] != "https://x/y?a=b" || got["retries"] != float64(3) || got["enabled"] != true || got["headers"] != "X-A: 1" {
		t.Fatalf("parsed = %#v", got)
	}
	_, err = parseSets([]string{"novalue"})
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"novalue"`) {
		t.Fatalf("missing = : %v", err)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
		ok   bool
	}{
		{"1.2.3", "1.2.4", -1, true}, {"v1.10.0", "1.9.9", 1, true}, {"1.2", "1.2.0", 0, true},
		{"1.2.3-rc1", "1.2.3", 0, true}, {"dev", "1.0.0", 0, false},
	} {
		got, ok := compareVersions(c.a, c.b)
		if got != c.want || ok != c.ok {
			t.Errorf("compare(%s,%s) = %d,%v", c.a, c.b, got, ok)
		}
	}
}

func TestPercentile(t *testing.T) {
	s := []int64{50, 10, 40, 30, 20, 60, 70, 80, 90, 100}
	if p := percentile(s, 0.5); p != 50 {
		t.Errorf("p50 = %d", p)
	}
	if p := percentile(s, 0.95); p != 100 {
		t.Errorf("p95 = %d", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("empty = %d", p)
	}
}

func TestPlanMigration(t *testing.T) {
	home := t.TempDir()
	legacy := filepath.Join(home, "agentry")
	root := filepath.Join(home, ".agentry")
	os.MkdirAll(filepath.Join(legacy, "skills", "s1"), 0o755)
	os.WriteFile(filepath.Join(legacy, "config.yaml"), []byte("storage: {dsn: "+legacy+"/agentry.db}\n"), 0o600)
	os.WriteFile(filepath.Join(legacy, "helper.yaml"), []byte("id: helper\n"), 0o644)
	os.WriteFile(filepath.Join(legacy, "agentry.db"), []byte("db"), 0o644)
	os.WriteFile(filepath.Join(legacy, "notes.txt"), []byte("?"), 0o644)
	p, err := planMigration(config.Workspace{Root: root, LegacyDir: legacy})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		filepath.Join(legacy, "config.yaml"):  filepath.Join(root, "config.yaml"),
		filepath.Join(legacy, "helper.yaml"):  filepath.Join(root, "agents", "helper.yaml"),
		filepath.Join(legacy, "agentry.db"):   filepath.Join(root, "data", "agentry.db"),
		filepath.Join(legacy, "skills", "s1"): filepath.Join(root, "skills", "s1"),
	}
	if len(p.Moves) != len(want) {
		t.Fatalf("moves = %+v", p.Moves)
	}
	for _, m := range p.Moves {
		if want[m.From] != m.To {
			t.Errorf("move %s -> %s, want %s", m.From, m.To, want[m.From])
		}
	}
	if len(p.Left) != 1 || len(p.Warnings) != 1 || len(p.Conflicts) != 0 {
		t.Fatalf("left %v warnings %v conflicts %v", p.Left, p.Warnings, p.Conflicts)
	}
}
