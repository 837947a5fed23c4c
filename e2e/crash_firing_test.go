package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// A scheduled firing runs turn by turn: killed with SIGKILL after its
// second turn, the restarted gateway finishes it; the provider answered
// each turn once and the channel got exactly one delivery, under one id.
func TestScheduledFiringSurvivesGatewayCrash(t *testing.T) {
	// Its own gateway process and Temporal server, mostly waiting: runs
	// beside the other crash tests (see crashParallel).
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")
	rcv := newSigReceiver(t, "firing-secret")

	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	slow := fakellm.Duration(1500 * time.Millisecond)
	write := func(name string) []fakellm.ToolCall {
		return []fakellm.ToolCall{fakellm.NewToolCall("write_file", map[string]string{"path": name, "content": "section " + name + "\n"})}
	}
	fake.Script(
		fakellm.Rule{Contains: "s3.md", Delay: slow, Reply: "Weekly report: three sections done."},
		fakellm.Rule{Contains: "s2.md", Delay: slow, ToolCalls: write("s3.md")},
		fakellm.Rule{Contains: "s1.md", Delay: slow, ToolCalls: write("s2.md")},
		fakellm.Rule{Contains: "weekly report please", Delay: slow, ToolCalls: write("s1.md")},
	)

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	// A cron that does not come round during the test: the firing is
	// started by hand.
	os.WriteFile(filepath.Join(ws, "agents", "weekly.yaml"), []byte(`id: weekly
llm: {provider: ollama, model: llama3.2}
builtins: [write_file]
max_turns: 6
trigger: cron
schedule:
  cron: "0 3 1 1 *"
  prompt: weekly report please
  output: {channel: webhook}
`), 0o644)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfgPath, []byte(deliveryConfig(rcv.URL(), "firing-secret", "")), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "crash-firing-key-0123456789"
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
	tr := wbCall(t, base, key, "POST", "/api/v1/schedules/weekly/trigger", nil)
	if tr.Status != 202 {
		t.Fatalf("trigger: %d %s", tr.Status, tr.Raw)
	}
	wid := tr.JSON["workflow_id"].(string)

	// Kill while turn 3 waits for its answer (turns 1 and 2 answered).
	deadline := time.Now().Add(60 * time.Second)
	for fake.CallCount() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("firing did not reach its third turn (%d provider calls)\n%s", fake.CallCount(), first.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Kill(t)

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	var last map[string]any
	for deadline := time.Now().Add(120 * time.Second); ; {
		r := wbCall(t, base, key, "GET", "/api/v1/schedules", nil)
		if list, _ := r.JSON["schedules"].([]any); len(list) == 1 {
			last, _ = list[0].(map[string]any)["last_outcome"].(map[string]any)
			if last != nil && last["status"] != "running" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("firing %s did not finish after the restart: %v\n%s", wid, last, wbTail(second.Output.String(), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last["status"] != "succeeded" || last["workflow_id"] != wid {
		t.Fatalf("firing after restart: %v", last)
	}
	waitUntil(t, 30*time.Second, "the delivery", func() bool { return len(scheduledBodies(rcv)) >= 1 })
	time.Sleep(2 * time.Second) // a second delivery would arrive by now
	bodies := scheduledBodies(rcv)
	if len(bodies) != 1 || bodies[0]["text"] != "Weekly report: three sections done." {
		t.Fatalf("deliveries %v", bodies)
	}
	if _, accepted, _, _, _ := rcv.snapshot(); len(accepted) != 1 {
		t.Fatalf("delivery ids %v, want one", accepted)
	}
	if id, _ := last["delivery_id"].(string); id == "" || bodies[0]["delivery_id"] != id {
		t.Fatalf("delivery id %v in the record, %v in the body", last["delivery_id"], bodies[0]["delivery_id"])
	}

	// Each turn answered once; only the call cut off by the kill repeated.
	answered := map[string]int{}
	for _, c := range fake.Calls() {
		if c.Status == 200 {
			answered[c.MessagesDigest]++
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
	second.Cmd.Process.Signal(syscall.SIGTERM)
	second.Cmd.Wait()
}
