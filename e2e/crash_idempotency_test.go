package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestHTTPToolIdempotencyKeySurvivesGatewayCrash kills the gateway process
// (SIGKILL) while a task run's http_get step waits for an endpoint (on
// loopback, recording the Idempotency-Key of every request; it holds the
// first request until the client goes away) and starts it again on the
// same workspace: the step is executed again and sends the same key as
// the execution the crash cut off, the run's next step sends a different
// key, and the run finishes.
func TestHTTPToolIdempotencyKeySurvivesGatewayCrash(t *testing.T) {
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")

	var mu sync.Mutex
	keys := map[string][]string{} // path -> keys, in order
	arrived := make(chan struct{}, 8)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.URL.Path] = append(keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
		n := len(keys[r.URL.Path])
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
		if r.URL.Path == "/refund" && n == 1 {
			<-r.Context().Done() // held until the killed gateway's connection drops
			return
		}
		fmt.Fprintf(w, "%s done", r.URL.Path[1:])
	}))
	t.Cleanup(func() { api.CloseClientConnections(); api.Close() })
	seen := func(path string) []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), keys[path]...)
	}

	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "receipt done", Reply: "Refunded once, receipt sent."},
		fakellm.Rule{Contains: "refund done", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("http_get", map[string]any{"url": api.URL + "/receipt"})}},
		fakellm.Rule{Contains: "Refund order 42", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("http_get", map[string]any{"url": api.URL + "/refund"})}},
	)

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "refunder.yaml"),
		[]byte("id: refunder\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [http_get]\nmax_turns: 4\n"), 0o644)
	cfgPath := filepath.Join(ws, "config.yaml")
	os.WriteFile(cfgPath, []byte("runtime: {ssrf: {enabled: true, allow_loopback: true}}\n"), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "crash-idem-key-0123456789"
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

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": "Refund order 42", "agent_id": "refunder"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	if run.Status != 202 {
		t.Fatalf("start run: %d %s", run.Status, run.Raw)
	}
	runID := int64(run.JSON["id"].(float64))

	select { // the refund request is in flight: kill
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("the run never called the endpoint\n%s", wbTail(first.Output.String(), 3000))
	}
	first.Kill(t)
	killedAt := time.Now()

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
	t.Logf("run finished %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	if final.JSON["status"] != "finished" || final.JSON["reply"] != "Refunded once, receipt sent." {
		t.Fatalf("run after restart: %s", final.Raw)
	}
	refund, receipt := seen("/refund"), seen("/receipt")
	t.Logf("refund keys %q, receipt keys %q", refund, receipt)
	if len(refund) != 2 || len(refund[0]) != 32 || refund[0] != refund[1] {
		t.Fatalf("the cut-off refund and its repeat sent keys %q, want the same key twice", refund)
	}
	if len(receipt) != 1 || len(receipt[0]) != 32 || receipt[0] == refund[0] {
		t.Fatalf("the receipt step sent keys %q (refund %s), want one other key", receipt, refund[0])
	}
}
