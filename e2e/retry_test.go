package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// retryAgent writes three parts and reads the first one back: five turns.
const retryAgent = "id: stepper\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file, read_file]\nmax_turns: 5\n"

// retryScript answers the five turns of retryAgent; turn 3 answers with
// HTTP 500 while broken. Turns 3-5 take delay (a crash test kills the
// gateway while one waits).
func retryScript(fake *fakellm.Server, broken bool, delay ...fakellm.Duration) {
	var slow fakellm.Duration
	if len(delay) > 0 {
		slow = delay[0]
	}
	turn3 := fakellm.Rule{Contains: "step2.md", Delay: slow, ToolCalls: []fakellm.ToolCall{
		fakellm.NewToolCall("write_file", map[string]string{"path": "step3.md", "content": "third-part\n"})}}
	if broken {
		turn3 = fakellm.Rule{Contains: "step2.md", Status: 500, Message: "the model is overloaded"}
	}
	fake.Script(
		fakellm.Rule{Contains: "Retry report", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "step1.md", "content": "first-part\n"})}},
		fakellm.Rule{Contains: "step1.md", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "step2.md", "content": "second-part\n"})}},
		turn3,
		fakellm.Rule{Contains: "step3.md", Delay: slow, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("read_file", map[string]string{"path": "step1.md"})}},
		fakellm.Rule{Contains: "first-part", Delay: slow, Reply: "All three parts are written."},
	)
}

// TestRetryGoesOnFromTheLastStep: a run fails at turn 3 of 5 (the provider
// answers 500 until told otherwise); retrying it starts attempt 2 (trigger
// retry) that sends turn 3 with exactly the conversation the failed turn
// sent, so the provider sees turns 3-5 only and the ledger has no second
// row for turns 1-2 (and a row per provider call: five for the failed turn 3). The files of the reused steps are in the new run's
// work directory (turn 4 reads one back). Refusals: a running or finished
// run is 409 with its status, unknown ones 404, a viewer 403; none of them
// changes anything.
func TestRetryGoesOnFromTheLastStep(t *testing.T) {
	fake := startFake(t)
	retryScript(fake, true)
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: map[string]string{"stepper.yaml": retryAgent}, Config: `
auth:
  keys:
    - {subject: vera, key: ` + wbViewerKey + `, role: viewer}
`})
	events := wbSubscribe(t, g, "type=run.started,run.failed,run.finished", "")
	taskID := wbCreateTask(t, g, map[string]any{"title": "Retry report", "agent_id": "stepper"})
	r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, r, 202, "start run")
	first := wbID(t, r)
	retryPath := func(task, run int64) string { return fmt.Sprintf("%s/tasks/%d/runs/%d/retry", wb, task, run) }
	runs := func() float64 {
		return g.Do("GET", fmt.Sprintf("%s/tasks/%d/runs", wb, taskID), nil).JSON["count"].(float64)
	}

	// While the provider fails, the run is still running: not retryable.
	wbWaitRun(t, g, taskID, first, 30*time.Second, "running")
	if r := g.Do("POST", retryPath(taskID, first), nil); r.Status != 409 || r.JSON["status"] != "running" || r.JSON["code"] != "run_not_retryable" {
		t.Fatalf("retry of a running run: %d %s", r.Status, r.Raw)
	}
	failed := wbWaitRun(t, g, taskID, first, 90*time.Second, "failed", "finished")
	if failed["status"] != "failed" || !strings.Contains(failed["error"].(string), "overloaded") || failed["turns"] != float64(2) {
		t.Fatalf("first attempt: %v", failed)
	}
	before := fake.Calls()
	brokenDigest := before[len(before)-1].MessagesDigest
	if len(before) != 2+5 { // turns 1 and 2, then turn 3 five times (activities.MaxProviderAttempts)
		t.Fatalf("provider calls of the first attempt: %d", len(before))
	}

	// Refused requests change nothing.
	wbWantStatus(t, g.DoAs(wbViewerKey, "POST", retryPath(taskID, first), nil), 403, "viewer retry")
	wbWantStatus(t, g.Do("POST", retryPath(taskID, 99999), nil), 404, "retry of an unknown run")
	wbWantStatus(t, g.Do("POST", retryPath(99999, first), nil), 404, "retry on an unknown task")
	if n := runs(); n != 1 {
		t.Fatalf("refused retries left runs: %v", n)
	}

	retryScript(fake, false) // the provider is well again
	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	started := time.Now()
	out := h.run("--json", "workboard", "retry", strconv.FormatInt(taskID, 10), strconv.FormatInt(first, 10))
	t.Logf("agentry workboard retry answered in %s", time.Since(started))
	expectCode(t, out, 0, "workboard retry")
	answer := out.JSON(t)
	second := int64(answer["id"].(float64))
	if answer["attempt"] != float64(2) || answer["trigger"] != "retry" || answer["retry_of"] != float64(first) || answer["reused_turns"] != float64(2) {
		t.Fatalf("retry answer %s", out)
	}
	done := wbWaitRun(t, g, taskID, second, 60*time.Second, "finished", "failed")
	if done["status"] != "finished" || done["reply"] != "All three parts are written." || done["turns"] != float64(5) {
		t.Fatalf("retried attempt: %v", done)
	}

	after := fake.Calls()[len(before):]
	if len(after) != 3 || after[0].MessagesDigest != brokenDigest {
		t.Fatalf("provider calls of the retry: %d (want turns 3-5 only, turn 3 with the failed turn's conversation)", len(after))
	}
	firstRows := ledger(t, g, fmt.Sprintf("run_id=taskrun-%d", first))
	retryRows := ledger(t, g, fmt.Sprintf("run_id=taskrun-%d", second))
	// A row per provider call: the first attempt's turn 3 was called five
	// times (a row each: -a1-t3, then -r2 ... -r5, all failed).
	if len(firstRows) != len(before) || len(retryRows) != len(after) {
		t.Fatalf("ledger rows: first attempt %+v, retry %+v", firstRows, retryRows)
	}
	failedTurn := 0
	for _, row := range firstRows {
		if strings.Contains(row.CallID, "-a1-t3") {
			failedTurn++
			if row.Outcome != "failed" {
				t.Errorf("ledger row of the failed turn %+v", row)
			}
		}
	}
	if failedTurn != 5 {
		t.Errorf("ledger rows of the failed turn 3: %d, want 5 (one per provider call)", failedTurn)
	}
	for _, row := range retryRows {
		if row.Trigger != "retry" || row.Outcome != "succeeded" ||
			!(strings.HasSuffix(row.CallID, "-a2-t3") || strings.HasSuffix(row.CallID, "-a2-t4") || strings.HasSuffix(row.CallID, "-a2-t5")) {
			t.Errorf("ledger row of the retry %+v", row)
		}
	}
	got := wbCollect(t, events, "run.finished", 30*time.Second)
	var retryStarted map[string]any
	for _, f := range got {
		if f.Type == "run.started" && f.Event.RunID == second {
			retryStarted = f.Event.PayloadMap()
			if f.Event.Attempt != 2 {
				t.Errorf("run.started of the retry: attempt %d", f.Event.Attempt)
			}
		}
	}
	if retryStarted["trigger"] != "retry" || retryStarted["retry_of"] != float64(first) || retryStarted["reused_turns"] != float64(2) {
		t.Fatalf("run.started of the retry: %v (events %v)", retryStarted, wbTypes(got))
	}

	// A finished run is not retried.
	if r := g.Do("POST", retryPath(taskID, second), nil); r.Status != 409 || r.JSON["status"] != "finished" {
		t.Fatalf("retry of a finished run: %d %s", r.Status, r.Raw)
	}
	if again := h.run("workboard", "retry", strconv.FormatInt(taskID, 10), strconv.FormatInt(second, 10)); again.Code == 0 ||
		!strings.Contains(again.Stderr, "is finished") {
		t.Fatalf("CLI retry of a finished run: %s", again)
	}
	if n := runs(); n != 2 {
		t.Fatalf("runs after the refused retry: %v", n)
	}
}
