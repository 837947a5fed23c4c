package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
)

// wbCall sends one API request to a gateway process.
func wbCall(t *testing.T, base, key, method, path string, body any) gatewaytest.Response {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, base+path, r)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := gatewaytest.Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &out.JSON)
	return out
}

// TestTaskRunSurvivesGatewayCrash kills the gateway process (SIGKILL) in
// the middle of a four-turn run and starts it again on the same
// workspace: the run finishes, its events are in the stream once each, and
// the provider saw every turn that had finished before the crash exactly
// once (only the turn in flight is asked again).
func TestTaskRunSurvivesGatewayCrash(t *testing.T) {
	// Its own gateway process and Temporal server, mostly waiting: runs
	// beside the other crash tests (see crashParallel).
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")

	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	// Each turn answers after a pause; the tool result of one turn
	// ("wrote N bytes to partK.md") selects the next answer.
	slow := fakellm.Duration(1500 * time.Millisecond)
	write := func(name string) []fakellm.ToolCall {
		return []fakellm.ToolCall{fakellm.NewToolCall("write_file", map[string]string{"path": name, "content": "content of " + name + "\n"})}
	}
	fake.Script(
		fakellm.Rule{Contains: "part3.md", Delay: slow, Reply: "All three parts are written."},
		fakellm.Rule{Contains: "part2.md", Delay: slow, ToolCalls: write("part3.md")},
		fakellm.Rule{Contains: "part1.md", Delay: slow, ToolCalls: write("part2.md")},
		fakellm.Rule{Contains: "Crash-proof", Delay: slow, ToolCalls: write("part1.md")},
	)

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "writer.yaml"),
		[]byte("id: writer\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 6\n"), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "crash-test-key-0123456789"
	env := map[string]string{
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
	task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": "Crash-proof report", "agent_id": "writer"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	if run.Status != 202 {
		t.Fatalf("start run: %d %s", run.Status, run.Raw)
	}
	runID := int64(run.JSON["id"].(float64))

	// Kill while the third turn waits for its answer: turn 3 is only asked
	// once turns 1 and 2 were answered, and its answer takes 1.5 s.
	// (CallCount, not Calls: the fake fills a record's fields while the call
	// is being answered.)
	deadline := time.Now().Add(60 * time.Second)
	for fake.CallCount() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("run did not reach its third turn (%d provider calls)\n%s", fake.CallCount(), first.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Kill(t)
	t.Logf("killed the gateway during turn 3 (%d provider calls so far)", fake.CallCount())

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	restarted := time.Now()
	var final gatewaytest.Response
	for deadline := time.Now().Add(90 * time.Second); ; {
		final = wbCall(t, base, key, "GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID), nil)
		if st := final.JSON["status"]; st == "finished" || st == "failed" || st == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not finish after the restart: %s\n%s", final.Raw, second.Output)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("run finished %s after the restart", time.Since(restarted).Round(time.Millisecond))
	if final.JSON["status"] != "finished" || final.JSON["turns"] != float64(4) || final.JSON["reply"] != "All three parts are written." {
		t.Fatalf("run after restart: %s", final.Raw)
	}
	if arts := wbCall(t, base, key, "GET", fmt.Sprintf("%s/tasks/%d/artifacts", wb, taskID), nil); arts.JSON["count"] != float64(3) {
		t.Fatalf("artifacts: %s", arts.Raw)
	}

	// Every event of the run once, in order.
	frames := wbCollect(t, wbSubscribeAt(t, base, key, fmt.Sprintf("task_id=%d&type=run.", taskID), "0"), "run.finished", 15*time.Second)
	frames = wbWithoutTurns(frames) // the turns are checked by TestWorkboardRunProducesArtifactsAndEvents
	want := "[run.started run.artifact run.artifact run.artifact run.finished]"
	if got := fmt.Sprint(wbTypes(frames)); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	names := map[string]int{}
	for _, f := range frames[1:4] {
		names[f.Event.PayloadMap()["name"].(string)]++
	}
	if names["part1.md"] != 1 || names["part2.md"] != 1 || names["part3.md"] != 1 {
		t.Fatalf("artifact events %v", names)
	}

	// The provider answered each of the four turns exactly once; the only
	// repeated request is the one cut off by the crash.
	answered := map[string]int{}
	cut := map[string]int{}
	for _, c := range fake.Calls() {
		switch c.Status {
		case 200:
			answered[c.MessagesDigest]++
		case 0:
			cut[c.MessagesDigest]++
		}
	}
	if len(answered) != 4 {
		t.Fatalf("%d distinct turns answered, want 4: %v", len(answered), answered)
	}
	for digest, n := range answered {
		if n != 1 {
			t.Fatalf("turn %s answered %d times", digest, n)
		}
	}
	if len(cut) != 1 {
		t.Fatalf("cut-off calls %v", cut)
	}
	for digest := range cut {
		if answered[digest] != 1 {
			t.Fatal("the call cut off by the crash was not repeated after the restart")
		}
	}
	// The ledger counts every provider request (issue 18 item 10) with a
	// row of its own (issue 48): one row per turn answered, plus the
	// request the crash cut off, whose repetition has the id <turn>-r2;
	// each finished turn is settled as answered once.
	var calls struct {
		Calls []ledgerRow `json:"calls"`
	}
	if r := wbCall(t, base, key, "GET", "/api/v1/costs/calls?limit=100", nil); r.Status != 200 || json.Unmarshal(r.Raw, &calls) != nil {
		t.Fatalf("ledger: %d %s", r.Status, r.Raw)
	}
	attempts, succeeded, repeats := 0, 0, 0
	for _, c := range calls.Calls {
		attempts += c.Attempts
		if c.Outcome == "succeeded" {
			succeeded++
		}
		if strings.HasSuffix(c.CallID, "-r2") {
			repeats++
		}
	}
	if len(calls.Calls) != fake.CallCount() || attempts != fake.CallCount() || succeeded != 4 || repeats != 1 {
		t.Fatalf("ledger: %d rows, %d attempts, %d succeeded, %d repeats (-r2); provider saw %d requests: %+v",
			len(calls.Calls), attempts, succeeded, repeats, fake.CallCount(), calls.Calls)
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

func wbTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
