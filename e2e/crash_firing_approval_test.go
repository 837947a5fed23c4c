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

// A scheduled firing whose agent lists write_file under approvals.tools
// parks like a task run: the approval names the firing (schedule and
// workflow id, no task), the firing's record waits for approval, and
// nothing is written. The gateway is killed (SIGKILL) and started again:
// the approval is still pending; `agentry approvals list --schedule`
// shows the firing and `agentry approvals approve` decides it (the Update
// reaches the firing's workflow). The file is written once, the provider
// answered each turn once, and the reply is delivered once.
func TestFiringApprovalSurvivesGatewayCrash(t *testing.T) {
	// Its own gateway process and Temporal server, mostly waiting: runs
	// beside the other crash tests (see crashParallel).
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")
	rcv := newSigReceiver(t, "firing-approval-secret")
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "Guarded weekly report: written after approval."},
		fakellm.Rule{Contains: "guarded weekly please", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "guarded.md", "content": "approved section\n"})}},
	)

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "weekly.yaml"), []byte(`id: weekly
llm: {provider: ollama, model: llama3.2}
builtins: [write_file]
max_turns: 4
approvals: {tools: [write_file], timeout: 1h}
trigger: cron
schedule:
  cron: "0 3 1 1 *"
  prompt: guarded weekly please
  output: {channel: webhook}
`), 0o644)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfgPath, []byte(deliveryConfig(rcv.URL(), "firing-approval-secret", "")), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "firing-approval-key-0123456789"
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
	written := func() []string {
		files, _ := filepath.Glob(filepath.Join(ws, "artifacts", "scheduled", "weekly", "*", "guarded.md"))
		return files
	}
	lastOutcome := func() map[string]any {
		r := wbCall(t, base, key, "GET", "/api/v1/schedules", nil)
		if list, _ := r.JSON["schedules"].([]any); len(list) == 1 {
			last, _ := list[0].(map[string]any)["last_outcome"].(map[string]any)
			return last
		}
		return nil
	}

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	tr := wbCall(t, base, key, "POST", "/api/v1/schedules/weekly/trigger", nil)
	if tr.Status != 202 {
		t.Fatalf("trigger: %d %s", tr.Status, tr.Raw)
	}
	wid := tr.JSON["workflow_id"].(string)
	const pendingPath = "/api/v1/approvals?status=pending&schedule=weekly"
	var pending []any
	for deadline := time.Now().Add(60 * time.Second); len(pending) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no pending approval\n%s", wbTail(first.Output.String(), 3000))
		}
		pending, _ = wbCall(t, base, key, "GET", pendingPath, nil).JSON["approvals"].([]any)
	}
	ap := pending[0].(map[string]any)
	apID := int64(ap["id"].(float64))
	firing, _ := ap["firing"].(map[string]any)
	if ap["tool"] != "write_file" || ap["task_id"] != nil || ap["workflow_id"] != wid || firing == nil || firing["workflow_id"] != wid ||
		firing["agent_id"] != "weekly" || firing["schedule_id"] == "" {
		t.Fatalf("approval %v", ap)
	}
	if last := lastOutcome(); last["status"] != "waiting" || last["waiting_for"] != "approval" || last["workflow_id"] != wid {
		t.Fatalf("firing while parked: %v", last)
	}
	first.Kill(t)

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	if r := wbCall(t, base, key, "GET", pendingPath, nil); len(r.JSON["approvals"].([]any)) != 1 {
		t.Fatalf("after the restart: %s", r.Raw)
	}
	if files := written(); len(files) != 0 {
		t.Fatalf("written before anyone approved: %v", files)
	}

	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = base
	h.Env["AGENTRY_API_KEY"] = key
	list := h.run("approvals", "list", "--schedule", "weekly")
	expectCode(t, list, 0, "approvals list")
	expectContains(t, list.Stdout, "firing "+wid, "approvals list")
	ok := h.run("approvals", "approve", strconv.FormatInt(apID, 10), "--comment", "ship it")
	expectCode(t, ok, 0, "approvals approve")
	expectContains(t, ok.Stdout, "of firing "+wid+") is approved", "approvals approve")
	if r := wbCall(t, base, key, "POST", fmt.Sprintf("/api/v1/approvals/%d", apID), map[string]any{"decision": "reject"}); r.Status != 409 || r.JSON["status"] != "approved" {
		t.Fatalf("second decision: %d %s", r.Status, r.Raw)
	}

	var last map[string]any
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if last = lastOutcome(); last != nil && last["status"] != "running" && last["status"] != "waiting" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("firing %s did not finish after the approval: %v\n%s", wid, last, wbTail(second.Output.String(), 3000))
		}
	}
	if last["status"] != "succeeded" || last["workflow_id"] != wid {
		t.Fatalf("firing: %v", last)
	}
	files := written()
	if len(files) != 1 {
		t.Fatalf("files %v, want one", files)
	}
	if body, err := os.ReadFile(files[0]); err != nil || string(body) != "approved section\n" {
		t.Fatalf("file: %q %v", body, err)
	}
	waitUntil(t, 30*time.Second, "the delivery", func() bool { return len(scheduledBodies(rcv)) >= 1 })
	time.Sleep(2 * time.Second) // a second delivery would arrive by now
	if bodies := scheduledBodies(rcv); len(bodies) != 1 || bodies[0]["text"] != "Guarded weekly report: written after approval." {
		t.Fatalf("deliveries %v", bodies)
	}
	answered := map[string]int{}
	for _, c := range fake.Calls() {
		if c.Status == 200 {
			answered[c.MessagesDigest]++
		}
	}
	if len(answered) != 2 {
		t.Fatalf("%d distinct turns answered, want 2: %v", len(answered), answered)
	}
	for digest, n := range answered {
		if n != 1 {
			t.Fatalf("turn %s answered %d times", digest, n)
		}
	}
	frames := wbCollect(t, wbSubscribeAt(t, base, key, "agent_id=weekly&type=run.approval", "0"), "run.approval_decided", 15*time.Second)
	if got := fmt.Sprint(wbTypes(frames)); got != "[run.approval_requested run.approval_decided]" {
		t.Fatalf("events %s", got)
	}
	for _, f := range frames {
		if p := f.Event.PayloadMap(); p["schedule_id"] != firing["schedule_id"] || p["workflow_id"] != wid || f.Event.TaskID != 0 {
			t.Fatalf("%s: %+v", f.Type, f.Event)
		}
	}
	second.Cmd.Process.Signal(syscall.SIGTERM)
	second.Cmd.Wait()
}
