package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/sandbox/sandboxtest"
)

// TestRunPythonSurvivesGatewayCrash kills the gateway (SIGKILL) while a
// task run's run_python execution sleeps, and starts it again on the same
// workspace: the execution is run again once (it logs each start into
// the run's work directory, the only place it can write), the run
// finishes with the code's answer, and no sandbox process of the killed
// gateway is left.
func TestRunPythonSurvivesGatewayCrash(t *testing.T) {
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")
	comm := "sbx" + sandboxtest.Marker()[:8]
	code := fmt.Sprintf("import time\nopen('/proc/self/comm','w').write(%q)\nopen('calls.log','a').write('start\\n')\ntime.sleep(6)\nopen('calls.log','a').write('done\\n')\nprint('slept well')\n", comm)
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "slept well", Reply: "The code ran."},
		fakellm.Rule{Contains: "Slow code job", ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("run_python", map[string]any{"code": code})}},
	)
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "coder.yaml"),
		[]byte("id: coder\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [run_python]\nmax_turns: 4\n"), 0o644)
	cfgPath := filepath.Join(ws, "config.yaml")
	os.WriteFile(cfgPath, []byte("runtime: {ssrf: {enabled: true, allow_loopback: true}, sandbox: {wall_time: 20s}}\n"), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "crash-python-key-0123456789"
	env := map[string]string{
		"AGENTRY_CONFIG_PATH":                     cfgPath,
		"AGENTRY_WORKSPACE":                       ws,
		"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
		"AGENTRY_SERVER_API_KEY":                  key,
		"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
		"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":    "false",
		"AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL":   fake.URL(),
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	logText := func() string {
		var out string
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "calls.log" {
				b, _ := os.ReadFile(p)
				out = string(b)
			}
			return nil
		})
		return out
	}

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	health := wbCall(t, base, key, "GET", "/health", nil)
	if !strings.Contains(string(health.Raw), `"sandbox"`) || !strings.Contains(string(health.Raw), "bubblewrap") {
		t.Fatalf("/health does not report the sandbox: %s", health.Raw)
	}
	task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": "Slow code job", "agent_id": "coder"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	if run.Status != 202 {
		t.Fatalf("start run: %d %s", run.Status, run.Raw)
	}
	runID := int64(run.JSON["id"].(float64))
	for deadline := time.Now().Add(60 * time.Second); strings.Count(logText(), "start") < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the run never started the code\n%s", wbTail(first.Output.String(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Kill(t)
	time.Sleep(500 * time.Millisecond)
	if n := sandboxtest.ProcessesNamed(comm); n > 0 {
		t.Fatalf("%d sandbox processes outlived the killed gateway", n)
	}

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	var final gatewaytest.Response
	for deadline := time.Now().Add(120 * time.Second); ; {
		final = wbCall(t, base, key, "GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID), nil)
		if st := final.JSON["status"]; st == "finished" || st == "failed" || st == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not finish after the restart: %s\n%s", final.Raw, wbTail(second.Output.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if final.JSON["status"] != "finished" || final.JSON["reply"] != "The code ran." {
		t.Fatalf("run after restart: %s", final.Raw)
	}
	if got := logText(); strings.Count(got, "start") != 2 || strings.Count(got, "done") != 1 {
		t.Fatalf("calls.log %q: want the cut-off execution and one repeat that finished", got)
	}
	if n := sandboxtest.ProcessesNamed(comm); n > 0 {
		t.Fatalf("%d sandbox processes outlived their call", n)
	}
	second.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- second.Cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Errorf("gateway did not stop after SIGTERM")
	}
}
