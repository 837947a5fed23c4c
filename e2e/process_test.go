package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// gatewayEnv is the environment of an agentryd child process on free ports.
func gatewayEnv(t *testing.T, ws string) (map[string]string, int, int) {
	ports := gatewaytest.FreePorts(t, 3)
	return map[string]string{
		"AGENTRY_WORKSPACE":                       ws,
		"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
		"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
		"AGENTRY_TEMPORAL_EMBEDDED_UI_PORT":       strconv.Itoa(ports[2]),
	}, ports[0], ports[2]
}

// TestGatewayProcessRunsStopsAndRestarts runs the real binary with no
// config file: a key is generated and printed once, /health and the
// Temporal UI answer, SIGINT stops it within 10 s, and it restarts on the
// same workspace.
func TestGatewayProcessRunsStopsAndRestarts(t *testing.T) {
	bin := gatewaytest.Binary(t, "agentryd")
	ws := t.TempDir()
	env, port, uiPort := gatewayEnv(t, ws)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	p := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, p)
	var health struct {
		Status string                       `json:"status"`
		Checks map[string]map[string]string `json:"checks"`
	}
	getJSONFrom(t, base+"/health", "", &health)
	if health.Status != "ok" || health.Checks["database"]["status"] != "ok" || health.Checks["temporal"]["status"] != "ok" {
		t.Fatalf("health %+v", health)
	}
	gatewaytest.WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/", uiPort), 30*time.Second, p)

	keyFile := filepath.Join(ws, "credentials", "api_key")
	st, err := os.Stat(keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	key, _ := os.ReadFile(keyFile)
	if !p.Contains(strings.TrimSpace(string(key))) {
		t.Fatalf("generated key not printed:\n%s", p.Output)
	}
	if r := getStatus(t, base+"/api/v1/agents", strings.TrimSpace(string(key))); r != 200 {
		t.Fatalf("generated key refused: %d", r)
	}
	if r := getStatus(t, base+"/api/v1/agents", "nope"); r != 401 {
		t.Fatalf("wrong key: %d", r)
	}

	stopWithin(t, p, syscall.SIGINT, 10*time.Second)

	p2 := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 60*time.Second, p2)
	if p2.Contains(strings.TrimSpace(string(key))) {
		t.Fatal("the key must be printed only on first start")
	}
	stopWithin(t, p2, syscall.SIGTERM, 10*time.Second)
}

func stopWithin(t *testing.T, p *gatewaytest.Process, sig os.Signal, limit time.Duration) {
	t.Helper()
	start := time.Now()
	p.Cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after %v: %v\n%s", sig, err, p.Output)
		}
		t.Logf("stopped on %v in %v", sig, time.Since(start).Round(time.Millisecond))
	case <-time.After(limit):
		t.Fatalf("still running %v after %v\n%s", limit, sig, p.Output)
	}
}

func TestBusyPortsGiveOneLineErrors(t *testing.T) {
	bin := gatewaytest.Binary(t, "agentryd")
	for _, tc := range []struct {
		envKey, configKey string
	}{
		{"AGENTRY_SERVER_PORT", "server.port"},
		{"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT", "temporal.embedded.frontend_port"},
		{"AGENTRY_TEMPORAL_EMBEDDED_UI_PORT", "temporal.embedded.ui_port"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		env, _, _ := gatewayEnv(t, t.TempDir())
		env[tc.envKey] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		p := gatewaytest.StartProcess(t, bin, env)
		err = p.Cmd.Wait()
		ln.Close()
		out := strings.TrimSpace(p.Output.String())
		last := out[strings.LastIndex(out, "\n")+1:]
		if err == nil || !strings.Contains(last, tc.configKey) || !strings.Contains(last, "already in use") {
			t.Errorf("%s busy: exit %v, last line %q\n%s", tc.configKey, err, last, out)
		}
		if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
			t.Errorf("%s busy: crashed\n%s", tc.configKey, out)
		}
	}
}

func TestBadConfigRefusesToStart(t *testing.T) {
	bin := gatewaytest.Binary(t, "agentryd")
	cases := map[string]string{
		"server:\n  port: 1\n  host: [oops\n":                 "config.yaml",
		"server:\n  port: many\n":                             "server.port",
		"auth:\n  mode: magic\n":                              "auth.mode",
		"auth:\n  mode: jwt\n":                                "auth.jwt.secret",
		"costs:\n  pricing:\n    a/b: {input_per_mtok: -2}\n": "costs.pricing.a/b",
		"telemetry:\n  exporter: jaeger\n":                    "telemetry.exporter",
	}
	for body, want := range cases {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, "config.yaml"), []byte(body), 0o644)
		env, _, _ := gatewayEnv(t, ws)
		p := gatewaytest.StartProcess(t, bin, env)
		err := p.Cmd.Wait()
		if err == nil || !strings.Contains(p.Output.String(), want) {
			t.Errorf("%q: exit %v, output %s", body, err, p.Output)
		}
		if _, err := os.Stat(filepath.Join(ws, "data")); err == nil {
			t.Errorf("%q: the workspace was touched before the config was valid", body)
		}
	}
}

// TestScaleOutTopology runs one Temporal (agentryd dev temporal), one
// PostgreSQL and two gateway processes: both serve /health and share state
// (a chat answered by one gateway takes feedback through the other).
func TestScaleOutTopology(t *testing.T) {
	bin := gatewaytest.Binary(t, "agentryd")
	dsn := testenv.Postgres(t)
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	agents := t.TempDir()
	os.WriteFile(filepath.Join(agents, "a.yaml"), []byte("id: shared\n"), 0o644)

	tws := t.TempDir()
	tenv, _, _ := gatewayEnv(t, tws)
	tenv["AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED"] = "false"
	temporal := gatewaytest.StartProcess(t, bin, tenv, "dev", "temporal")
	addr := "127.0.0.1:" + tenv["AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT"]
	waitTCP(t, addr, 60*time.Second, temporal)

	var urls []string
	for i := 0; i < 2; i++ {
		env, port, _ := gatewayEnv(t, t.TempDir())
		env["AGENTRY_TEMPORAL_ADDRESS"] = addr
		env["AGENTRY_STORAGE_BACKEND"] = "postgres"
		env["AGENTRY_STORAGE_DSN"] = dsn
		env["AGENTRY_SERVER_API_KEY"] = "shared-key"
		env["AGENTRY_AGENT_DIRS"] = agents
		env["AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL"] = fake.URL()
		p := gatewaytest.StartProcess(t, bin, env)
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		gatewaytest.WaitHTTP(t, url+"/health", 60*time.Second, p)
		urls = append(urls, url)
	}
	var reply map[string]any
	postJSONTo(t, urls[0]+"/api/v1/chat", "shared-key", `{"agent_id":"shared","text":"hi"}`, 200, &reply)
	fb := fmt.Sprintf(`{"agent_id":"shared","session_id":%q,"run_id":%q,"response_id":%q,"rating":1}`, reply["session_id"], reply["run_id"], reply["response_id"])
	postJSONTo(t, urls[1]+"/api/v1/chat/feedback", "shared-key", fb, 200, nil)
	var list map[string]any
	getJSONFrom(t, urls[0]+"/api/v1/learning/feedback", "shared-key", &list)
	if list["count"] != float64(1) {
		t.Fatalf("feedback through gateway B not visible on A: %v", list)
	}
}

func waitTCP(t *testing.T, addr string, timeout time.Duration, p *gatewaytest.Process) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not listening\n%s", addr, p.Output)
}

func getStatus(t *testing.T, url, key string) int {
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getJSONFrom(t *testing.T, url, key string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func postJSONTo(t *testing.T, url, key, body string, want int, v any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	if v != nil {
		json.Unmarshal(raw, v)
	}
}
