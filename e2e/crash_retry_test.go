package e2e

import (
	"encoding/json"
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

// A retry from the last step survives gateway crashes: the gateway is
// killed (SIGKILL) right after POST .../retry was accepted, and again in
// the middle of the retried attempt (turn 3 answered, turn 4 waiting for
// its answer). After the last restart the retry attempt finishes; the
// provider never saw turns 1-2 again and answered each of turns 3-5 once
// (only the request cut off by the kill was repeated); the ledger has a
// row per provider call of the retry (the cut-off request's own), trigger
// retry, each turn settled as answered once; there is one
// retry run and one run.started for it.
func TestRetrySurvivesGatewayCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := gatewaytest.Binary(t, "agentryd")
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	retryScript(fake, true)

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "stepper.yaml"), []byte(retryAgent), 0o644)
	ports := gatewaytest.FreePorts(t, 2)
	const key = "crash-retry-key-0123456789"
	env := map[string]string{
		"AGENTRY_WORKSPACE":                       ws,
		"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
		"AGENTRY_SERVER_API_KEY":                  key,
		"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
		"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":    "false",
		"AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL":   fake.URL(),
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	start := func() *gatewaytest.Process {
		p := gatewaytest.StartProcess(t, bin, env)
		gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, p)
		return p
	}
	runPath := func(taskID, runID int64) string { return fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID) }
	waitRun := func(p *gatewaytest.Process, taskID, runID int64, timeout time.Duration) map[string]any {
		for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
			r := wbCall(t, base, key, "GET", runPath(taskID, runID), nil)
			if st := r.JSON["status"]; st == "finished" || st == "failed" || st == "cancelled" {
				return r.JSON
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d did not end: %s\n%s", runID, r.Raw, wbTail(p.Output.String(), 3000))
			}
		}
	}

	first := start()
	task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": "Retry report", "agent_id": "stepper"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	r := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	if r.Status != 202 {
		t.Fatalf("start run: %d %s", r.Status, r.Raw)
	}
	failedID := int64(r.JSON["id"].(float64))
	if failed := waitRun(first, taskID, failedID, 90*time.Second); failed["status"] != "failed" || failed["turns"] != float64(2) {
		t.Fatalf("first attempt: %v", failed)
	}
	before := fake.Calls()
	paid := map[string]bool{} // the turns the failed attempt was answered (and paid)
	for _, c := range before {
		if c.Status == 200 {
			paid[c.MessagesDigest] = true
		}
	}
	if len(paid) != 2 {
		t.Fatalf("the failed attempt was answered %d turns, want 2", len(paid))
	}

	// Kill 1: right after the retry was accepted.
	retryScript(fake, false, fakellm.Duration(1500*time.Millisecond))
	// The run's row says failed as its workflow records the failure; the
	// workflow closes a moment later, and until then a retry is refused
	// with 409 run_active ("try again when it has ended"): on a loaded
	// machine that moment lasted seconds.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r = wbCall(t, base, key, "POST", runPath(taskID, failedID)+"/retry", nil)
		if r.Status != 409 || r.JSON["code"] != "run_active" || time.Now().After(deadline) {
			break
		}
	}
	if r.Status != 202 || r.JSON["trigger"] != "retry" || r.JSON["reused_turns"] != float64(2) {
		t.Fatalf("retry: %d %s", r.Status, r.Raw)
	}
	first.Kill(t)
	retryID := int64(r.JSON["id"].(float64))
	t.Logf("killed the gateway right after the retry was accepted (%d provider calls)", fake.CallCount())

	// Kill 2: the retried attempt's turn 3 was answered and turn 4 waits.
	second := start()
	deadline := time.Now().Add(90 * time.Second)
	for {
		calls := fake.Calls()
		answered := -1
		for i := len(before); i < len(calls); i++ {
			if calls[i].Status == 200 {
				answered = i
			}
		}
		if answered >= 0 && fake.CallCount() > answered+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retry did not reach turn 4 (%d provider calls)\n%s", fake.CallCount(), wbTail(second.Output.String(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	second.Kill(t)
	t.Logf("killed the gateway while turn 4 of the retry waited (%d provider calls)", fake.CallCount())

	third := start()
	done := waitRun(third, taskID, retryID, 90*time.Second)
	if done["status"] != "finished" || done["reply"] != "All three parts are written." || done["turns"] != float64(5) ||
		done["trigger"] != "retry" || done["attempt"] != float64(2) {
		t.Fatalf("retried attempt: %v", done)
	}
	if runs := wbCall(t, base, key, "GET", fmt.Sprintf("%s/tasks/%d/runs", wb, taskID), nil); runs.JSON["count"] != float64(2) {
		t.Fatalf("runs: %s", runs.Raw)
	}

	answered := map[string]int{}
	for _, c := range fake.Calls()[len(before):] {
		if c.Status == 200 {
			answered[c.MessagesDigest]++
		}
	}
	if len(answered) != 3 {
		t.Fatalf("the retry was answered %d distinct turns, want 3 (turns 3-5): %v", len(answered), answered)
	}
	for digest, n := range answered {
		if paid[digest] {
			t.Fatalf("turn %s, paid by the failed attempt, was sent again", digest)
		}
		if n != 1 {
			t.Fatalf("turn %s answered %d times", digest, n)
		}
	}

	var ledger struct {
		Calls []ledgerRow `json:"calls"`
	}
	if r := wbCall(t, base, key, "GET", fmt.Sprintf("/api/v1/costs/calls?limit=100&run_id=taskrun-%d", retryID), nil); r.Status != 200 ||
		json.Unmarshal(r.Raw, &ledger) != nil {
		t.Fatalf("ledger: %d %s", r.Status, r.Raw)
	}
	// A row per provider call: the turn cut off by the kill has its own
	// row (never settled: priced by the reaper), its repetition another
	// (-r2); each turn is settled as answered once.
	retryCalls := len(fake.Calls()) - len(before)
	succeeded := map[string]int{}
	for _, row := range ledger.Calls {
		turn := strings.TrimSuffix(row.CallID, "-r2")
		if row.Trigger != "retry" ||
			!(strings.HasSuffix(turn, "-a2-t3") || strings.HasSuffix(turn, "-a2-t4") || strings.HasSuffix(turn, "-a2-t5")) {
			t.Errorf("ledger row of the retry %+v", row)
		}
		if row.Outcome == "succeeded" {
			succeeded[turn[strings.LastIndex(turn, "-"):]]++
		}
	}
	if len(ledger.Calls) != retryCalls || len(succeeded) != 3 || succeeded["-t3"] != 1 || succeeded["-t4"] != 1 || succeeded["-t5"] != 1 {
		t.Fatalf("ledger rows of the retry (%d provider calls, settled turns %v): %+v", retryCalls, succeeded, ledger.Calls)
	}

	frames := wbCollect(t, wbSubscribeAt(t, base, key, fmt.Sprintf("task_id=%d&type=run.started,run.finished", taskID), "0"), "run.finished", 15*time.Second)
	started := 0
	for _, f := range frames {
		if f.Type == "run.started" && f.Event.RunID == retryID {
			started++
			if p := f.Event.PayloadMap(); p["trigger"] != "retry" || f.Event.Attempt != 2 {
				t.Fatalf("run.started of the retry: %+v", f.Event)
			}
		}
	}
	if started != 1 {
		t.Fatalf("run.started of the retry %d times (events %v)", started, wbTypes(frames))
	}
	third.Cmd.Process.Signal(syscall.SIGTERM)
	third.Cmd.Wait()
}
