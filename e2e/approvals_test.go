package e2e

import (
	"fmt"
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

// TestApprovalSurvivesGatewayCrash: a task run parks on write_file (its
// agent lists it under approvals.tools); the gateway is killed (SIGKILL)
// and started again; the approval is still pending and the run still
// waiting; viewers and members may not decide, a bad decision is 400, an
// unknown approval 404; an operator approves, the file is written once and
// the run finishes; a second decision is 409 with the current decision.
func TestApprovalSurvivesGatewayCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "The guarded file is written."},
		fakellm.Rule{Contains: "Guarded report", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "guarded.md", "content": "approved content\n"})}},
	)

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "guarded.yaml"), []byte("id: guarded\nllm: {provider: ollama, model: llama3.2}\n"+
		"builtins: [write_file]\nmax_turns: 4\napprovals: {tools: [write_file], timeout: 1h}\n"), 0o644)
	const (
		key      = "approval-admin-key-0123456789"
		opKey    = "approval-operator-key-0123456789"
		viewKey  = "approval-viewer-key-0123456789"
		membKey  = "approval-member-key-0123456789"
		approvls = "/api/v1/approvals"
	)
	os.WriteFile(filepath.Join(ws, "config.yaml"), []byte(fmt.Sprintf(`auth:
  keys:
    - {subject: olga, key: %s, role: operator}
    - {subject: vera, key: %s, role: viewer}
    - {subject: mia, key: %s, role: member}
`, opKey, viewKey, membKey)), 0o600)
	ports := gatewaytest.FreePorts(t, 2)
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
	task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": "Guarded report", "agent_id": "guarded"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	if run.Status != 202 {
		t.Fatalf("start run: %d %s", run.Status, run.Raw)
	}
	runID := int64(run.JSON["id"].(float64))
	runPath := fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID)
	pendingPath := fmt.Sprintf("%s?status=pending&task_id=%d", approvls, taskID)

	var pending []any
	for deadline := time.Now().Add(60 * time.Second); len(pending) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no pending approval\n%s", wbTail(first.Output.String(), 3000))
		}
		pending, _ = wbCall(t, base, key, "GET", pendingPath, nil).JSON["approvals"].([]any)
	}
	ap := pending[0].(map[string]any)
	apID := int64(ap["id"].(float64))
	if ap["tool"] != "write_file" || ap["run_id"] != float64(runID) || ap["arguments"].(map[string]any)["path"] != "guarded.md" || ap["expires_at"] == nil {
		t.Fatalf("approval %v", ap)
	}
	if r := wbCall(t, base, key, "GET", runPath, nil); r.JSON["status"] != "waiting" || r.JSON["waiting_for"] != "approval" {
		t.Fatalf("run while parked: %s", r.Raw)
	}
	first.Kill(t)

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	if r := wbCall(t, base, key, "GET", pendingPath, nil); len(r.JSON["approvals"].([]any)) != 1 {
		t.Fatalf("after the restart: %s", r.Raw)
	}
	if r := wbCall(t, base, key, "GET", runPath, nil); r.JSON["status"] != "waiting" {
		t.Fatalf("run after the restart: %s", r.Raw)
	}
	if _, err := os.Stat(filepath.Join(ws, "artifacts", strconv.FormatInt(taskID, 10), strconv.FormatInt(runID, 10), "guarded.md")); err == nil {
		t.Fatal("the file was written before anyone approved")
	}

	decide := func(k string, id int64, body map[string]any) gatewaytest.Response {
		return wbCall(t, base, k, "POST", fmt.Sprintf("%s/%d", approvls, id), body)
	}
	for _, c := range []struct {
		key    string
		id     int64
		body   map[string]any
		status int
	}{
		{viewKey, apID, map[string]any{"decision": "approve"}, 403},
		{membKey, apID, map[string]any{"decision": "approve"}, 403},
		{opKey, apID, map[string]any{"decision": "perhaps"}, 400},
		{opKey, apID + 1000, map[string]any{"decision": "approve"}, 404},
	} {
		if r := decide(c.key, c.id, c.body); r.Status != c.status {
			t.Fatalf("decision %v with %s: %d %s, want %d", c.body, c.key[:14], r.Status, r.Raw, c.status)
		}
	}
	if r := wbCall(t, base, key, "GET", fmt.Sprintf("%s/%d", approvls, apID), nil); r.JSON["status"] != "pending" {
		t.Fatalf("refused decisions changed the approval: %s", r.Raw)
	}
	r := decide(opKey, apID, map[string]any{"decision": "approve", "comment": "looks right"})
	if r.Status != 200 || r.JSON["status"] != "approved" || r.JSON["decided_by"] != "olga" {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	if r := decide(key, apID, map[string]any{"decision": "reject"}); r.Status != 409 || r.JSON["status"] != "approved" || r.JSON["decided_by"] != "olga" {
		t.Fatalf("second decision: %d %s", r.Status, r.Raw)
	}

	var final gatewaytest.Response
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		final = wbCall(t, base, key, "GET", runPath, nil)
		if st := final.JSON["status"]; st == "finished" || st == "failed" || st == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not finish after the approval: %s\n%s", final.Raw, wbTail(second.Output.String(), 3000))
		}
	}
	if final.JSON["status"] != "finished" || final.JSON["reply"] != "The guarded file is written." {
		t.Fatalf("run: %s", final.Raw)
	}
	body, err := os.ReadFile(filepath.Join(ws, "artifacts", strconv.FormatInt(taskID, 10), strconv.FormatInt(runID, 10), "guarded.md"))
	if err != nil || string(body) != "approved content\n" {
		t.Fatalf("file: %q %v", body, err)
	}
	frames := wbCollect(t, wbSubscribeAt(t, base, key, fmt.Sprintf("task_id=%d&type=run.", taskID), "0"), "run.finished", 15*time.Second)
	frames = wbWithoutTurns(frames) // the turns are checked by TestWorkboardRunProducesArtifactsAndEvents
	if got, want := fmt.Sprint(wbTypes(frames)), "[run.started run.approval_requested run.approval_decided run.artifact run.finished]"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	second.Cmd.Process.Signal(syscall.SIGTERM)
	second.Cmd.Wait()
}

// TestApprovalRejectedThroughCLI: `agentry approvals list|reject` on a
// parked run; the rejected call is never executed and the model is told
// who rejected it and why. In chat the same tool is refused with a clear
// tool result, since nobody can be asked while a request waits.
func TestApprovalRejectedThroughCLI(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"guarded.yaml": "id: guarded\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\n" +
			"approvals: {tools: [write_file]}\n",
	}})
	g.Fake.Script(
		fakellm.Rule{Contains: "rejected by admin: not this file", Reply: "Understood, nothing written."},
		fakellm.Rule{Contains: "needs a person's approval", Reply: "Chat cannot write it."},
		fakellm.Rule{Contains: "Guarded", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "nope.md", "content": "x"})}},
	)
	r := g.Do("POST", wb+"/tasks", map[string]any{"title": "Guarded write", "agent_id": "guarded"})
	taskID := wbID(t, r)
	run := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, run, 202, "start run")
	runID := wbID(t, run)

	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	var list result
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list = h.run("--json", "approvals", "list", "--task", strconv.FormatInt(taskID, 10))
		if aps, _ := list.JSON(t)["approvals"].([]any); len(aps) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending approval: %s", list)
		}
	}
	ap := list.JSON(t)["approvals"].([]any)[0].(map[string]any)
	id := strconv.FormatInt(int64(ap["id"].(float64)), 10)
	human := h.run("approvals", "list")
	expectCode(t, human, 0, "approvals list")
	expectContains(t, human.Stdout, "write_file", "approvals list")
	rej := h.run("--json", "approvals", "reject", id, "--comment", "not this file")
	expectCode(t, rej, 0, "approvals reject")
	if st := rej.JSON(t)["status"]; st != "rejected" {
		t.Fatalf("reject: %s", rej)
	}
	again := h.run("approvals", "approve", id)
	if again.Code == 0 || !strings.Contains(again.Stderr, "already rejected") {
		t.Fatalf("second decision: %s", again)
	}

	var final gatewaytest.Response
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		final = g.Do("GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID), nil)
		if final.JSON["status"] == "finished" || final.JSON["status"] == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not finish: %s", final.Raw)
		}
	}
	if final.JSON["status"] != "finished" || final.JSON["reply"] != "Understood, nothing written." {
		t.Fatalf("run: %s", final.Raw)
	}
	if arts := g.Do("GET", fmt.Sprintf("%s/tasks/%d/artifacts", wb, taskID), nil); arts.JSON["count"] != float64(0) {
		t.Fatalf("a rejected call wrote: %s", arts.Raw)
	}

	c := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "guarded", "text": "Guarded chat write"})
	if c.Status != 200 || c.JSON["reply"] != "Chat cannot write it." {
		t.Fatalf("chat: %d %s", c.Status, c.Raw)
	}
}
