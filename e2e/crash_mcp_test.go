package e2e

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/mcpserver"
)

// TestMCPCallSurvivesGatewayCrash kills the gateway process (SIGKILL)
// while a task run waits for a slow MCP tool (the dev SDK server over
// streamable HTTP on loopback, logging each call it starts and finishes)
// and starts it again on the same workspace: the tool call is made again
// exactly once (the durable tool step is retried after its heartbeat
// times out) with the same idempotency key in its _meta, the run finishes
// with the tool's answer, and the run's events hold one run.tool for the
// call.
func TestMCPCallSurvivesGatewayCrash(t *testing.T) {
	// Its own gateway process and Temporal server, mostly waiting: runs
	// beside the other crash tests (see crashParallel).
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")

	callLog := filepath.Join(t.TempDir(), "calls.log")
	h := mcpserver.Handler(mcpserver.New(mcpserver.Options{CallLog: callLog}))
	srv := httptest.NewServer(h)
	// The gateway's client keeps an SSE stream open: cut it, or Close waits.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })

	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "slept", Reply: "The slow tool answered."},
		fakellm.Rule{Contains: "Slow MCP job", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("mcp__slowsrv__slow", map[string]any{"seconds": 5, "tag": "crash"}),
		}},
	)

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "waiter.yaml"),
		[]byte("id: waiter\nllm: {provider: ollama, model: llama3.2}\nmcp: [slowsrv]\nmax_turns: 4\n"), 0o644)
	cfgPath := filepath.Join(ws, "config.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
runtime: {ssrf: {enabled: true, allow_loopback: true}}
mcp:
  slowsrv: {url: %q}
`, srv.URL)), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "crash-mcp-key-0123456789"
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
	calls := func(prefix string) int {
		data, _ := os.ReadFile(callLog)
		return strings.Count(string(data), prefix+" crash\n")
	}

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": "Slow MCP job", "agent_id": "waiter"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	if run.Status != 202 {
		t.Fatalf("start run: %d %s", run.Status, run.Raw)
	}
	runID := int64(run.JSON["id"].(float64))

	// Kill while the server works on the call (it takes 5 s).
	for deadline := time.Now().Add(60 * time.Second); calls("start") < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the run never called the slow tool\n%s", wbTail(first.Output.String(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Kill(t)
	killedAt := time.Now()
	t.Logf("killed the gateway during the MCP call (calls started %d, finished %d)", calls("start"), calls("done"))

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
	t.Logf("run finished %s after the kill; calls started %d, finished %d",
		time.Since(killedAt).Round(time.Millisecond), calls("start"), calls("done"))
	if final.JSON["status"] != "finished" || final.JSON["reply"] != "The slow tool answered." {
		t.Fatalf("run after restart: %s", final.Raw)
	}
	// The call cut off by the crash is made again, and only once; the
	// repeat ran to its end (the model read its answer).
	if n := calls("start"); n != 2 {
		t.Fatalf("the slow tool was called %d times, want 2 (the cut-off call and one repeat)", n)
	}
	if n := calls("done"); n < 1 {
		t.Fatal("no call of the slow tool ran to its end")
	}
	// Both executions carried the step's idempotency key in _meta, the
	// same one (issue 47: a step retried after a crash sends the same key).
	var keys []string
	data, _ := os.ReadFile(callLog)
	for _, line := range strings.Split(string(data), "\n") {
		if k, ok := strings.CutPrefix(line, "key crash "); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) != 2 || len(keys[0]) != 32 || keys[0] != keys[1] {
		t.Fatalf("idempotency keys of the cut-off call and its repeat: %q, want the same key twice", keys)
	}
	last := fake.Calls()[len(fake.Calls())-1]
	if !strings.Contains(string(last.Body), "slept 5s") {
		t.Fatalf("the model did not read the tool's answer: %s", last.Body)
	}

	// One run.tool event for the call, whatever the retries.
	frames := wbCollect(t, wbSubscribeAt(t, base, key, fmt.Sprintf("task_id=%d&type=run.", taskID), "0"), "run.finished", 15*time.Second)
	frames = wbWithoutTurns(frames) // the turns are checked by TestWorkboardRunProducesArtifactsAndEvents
	if got := fmt.Sprint(wbTypes(frames)); got != "[run.started run.tool run.finished]" {
		t.Fatalf("events %s", got)
	}
	if p := frames[1].Event.PayloadMap(); p["server"] != "slowsrv" || p["server_tool"] != "slow" || p["is_error"] != false {
		t.Fatalf("run.tool payload %v", p)
	}

	second.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- second.Cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Errorf("gateway did not stop after SIGTERM\n%s", wbTail(second.Output.String(), 3000))
	}
}
