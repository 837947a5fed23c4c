package agentry

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func onboardApp(home string) (*App, *bytes.Buffer, *bytes.Buffer) {
	env := config.MapEnv(map[string]string{"HOME": home, "AGENTRY_WORKSPACE": filepath.Join(home, ".agentry")})
	var out, errb bytes.Buffer
	return &App{Version: "test", Env: env, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, &out, &errb
}

// Non-interactive onboard against a fresh HOME: checks, a valid
// config.yaml without any key, the first agent, the command to try.
func TestOnboardNonInteractiveFreshHome(t *testing.T) {
	home := t.TempDir()
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"models":[]}`))
	}))
	defer ollama.Close()
	port := freePort(t)
	a, out, errb := onboardApp(home)
	code := a.Run(context.Background(), []string{"onboard", "--non-interactive", "--provider", "ollama", "--base-url", ollama.URL,
		"--port", strconv.Itoa(port), "--agent", "helper", "--json"})
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errb)
	}
	var res struct {
		Checks  []onboardCheck `json:"checks"`
		Written bool           `json:"written"`
		Config  string         `json:"config_file"`
		Agent   string         `json:"agent_file"`
		Try     string         `json:"try"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, c := range res.Checks {
		if c.Status != "ok" {
			t.Errorf("check %+v", c)
		}
	}
	cfg := config.Defaults()
	raw, err := os.ReadFile(res.Config)
	if err != nil || config.Parse(raw, res.Config, &cfg) != nil || config.Validate(&cfg) != nil {
		t.Fatalf("config %s: %v\n%s", res.Config, err, raw)
	}
	if cfg.Server.Port != port || cfg.LLM.DefaultProvider != "ollama" || cfg.LLM.Providers["ollama"].BaseURL != ollama.URL {
		t.Fatalf("config: %s", raw)
	}
	agent, err := os.ReadFile(res.Agent)
	if err != nil || !strings.Contains(string(agent), "id: helper") {
		t.Fatalf("agent %s: %v %s", res.Agent, err, agent)
	}
	if !strings.Contains(res.Try, "agentry chat --agent helper") {
		t.Fatalf("try: %q", res.Try)
	}
	// Run again: the workspace is set up, nothing changes.
	a, _, _ = onboardApp(home)
	if code := a.Run(context.Background(), []string{"onboard", "--non-interactive", "--port", strconv.Itoa(port)}); code == 0 {
		t.Fatal("a second onboard rewrote the configuration")
	}
}

// The key of a cloud provider is named, never written.
func TestOnboardWritesTheKeyVariableNotTheKey(t *testing.T) {
	home := t.TempDir()
	t.Setenv("OPENAI_API_KEY", "sk-onboard-never-in-file")
	a, out, errb := onboardApp(home)
	if code := a.Run(context.Background(), []string{"onboard", "--non-interactive", "--provider", "openai", "--base-url", "http://127.0.0.1:1/v1",
		"--port", strconv.Itoa(freePort(t))}); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errb)
	}
	raw, _ := os.ReadFile(filepath.Join(home, ".agentry", "config.yaml"))
	if !strings.Contains(string(raw), "api_key_env: OPENAI_API_KEY") || strings.Contains(string(raw), "sk-onboard") {
		t.Fatalf("config: %s", raw)
	}
	if !strings.Contains(out.String(), "warn model runtime") {
		t.Fatalf("an unreachable runtime is a warning: %s", out)
	}
}

func TestOnboardBadInputWritesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no terminal", []string{"onboard"}, ExitUsage, "pass --non-interactive"},
		{"port busy", []string{"onboard", "--non-interactive", "--port", strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)}, ExitFailure, "check port failed"},
		{"bad provider", []string{"onboard", "--non-interactive", "--provider", "cohere"}, ExitUsage, `provider "cohere"`},
		{"bad agent", []string{"onboard", "--non-interactive", "--agent", "Bad Name"}, ExitUsage, `agent "Bad Name"`},
		{"remote", []string{"onboard", "--non-interactive", "--gateway", "http://gw.example:18789"}, ExitFailure, "is remote"},
	} {
		home := t.TempDir()
		a, out, errb := onboardApp(home)
		code := a.Run(context.Background(), tc.args)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d, %s%s; want %d and %q", tc.name, code, out, errb, tc.code, tc.want)
		}
		if _, err := os.Stat(filepath.Join(home, ".agentry", "config.yaml")); err == nil {
			t.Errorf("%s: config.yaml written", tc.name)
		}
	}
}

// --install-daemon where no service manager runs: the configuration is
// written, the failure is named, the exit is non-zero.
func TestOnboardInstallDaemonWithoutServiceManager(t *testing.T) {
	home := t.TempDir()
	a, out, errb := onboardApp(home)
	code := a.Run(context.Background(), []string{"onboard", "--non-interactive", "--base-url", "http://127.0.0.1:1", "--port", strconv.Itoa(freePort(t)), "--install-daemon"})
	if _, err := os.Stat(filepath.Join(home, ".agentry", "config.yaml")); err != nil {
		t.Fatalf("config not written: %v", err)
	}
	if code == 0 && !strings.Contains(out.String(), "daemon start") {
		t.Fatalf("exit 0 without the daemon: %s", out)
	}
	if code != 0 && !strings.Contains(errb.String(), "no service manager") {
		t.Fatalf("exit %d: %s %s", code, out, errb)
	}
}

// A key given on stdin is handed to the gateway as a seeded secret:
// config.yaml names the secret, neither it nor the output holds the key.
func TestOnboardKeyFromStdinIsSeededNotWritten(t *testing.T) {
	home := t.TempDir()
	const key = "sk-typed-onboard-4711"
	a, out, errb := onboardApp(home)
	a.Stdin = strings.NewReader(key + "\n")
	if code := a.Run(context.Background(), []string{"onboard", "--non-interactive", "--provider", "openai", "--base-url", "http://127.0.0.1:1/v1",
		"--port", strconv.Itoa(freePort(t)), "--api-key-stdin"}); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errb)
	}
	ws := filepath.Join(home, ".agentry")
	raw, _ := os.ReadFile(filepath.Join(ws, "config.yaml"))
	if !strings.Contains(string(raw), "api_key_secret: llm-openai") || strings.Contains(string(raw), "api_key_env") || strings.Contains(string(raw), key) {
		t.Fatalf("config: %s", raw)
	}
	if strings.Contains(out.String()+errb.String(), key) {
		t.Fatalf("the key was printed: %s %s", out, errb)
	}
	seedFile := filepath.Join(ws, "credentials", "seed", "llm-openai")
	st, err := os.Stat(seedFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("seed %s: %v %v", seedFile, st, err)
	}
	if got, _ := os.ReadFile(seedFile); string(got) != key {
		t.Fatalf("seed holds %q", got)
	}

	// Without --non-interactive the form needs stdin: refused, nothing written.
	home2 := t.TempDir()
	a, out, errb = onboardApp(home2)
	a.Stdin = strings.NewReader(key)
	if code := a.Run(context.Background(), []string{"onboard", "--api-key-stdin"}); code == 0 {
		t.Fatalf("onboard --api-key-stdin without --non-interactive succeeded: %s", out)
	}
	if _, err := os.Stat(filepath.Join(home2, ".agentry", "config.yaml")); !os.IsNotExist(err) {
		t.Fatalf("config written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home2, ".agentry", "credentials", "seed")); !os.IsNotExist(err) {
		t.Fatalf("seed written: %v", err)
	}
}
