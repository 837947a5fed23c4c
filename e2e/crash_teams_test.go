package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestTeamSurvivesGatewayCrash: SIGKILL while two children run (lead ->
// research -> fact, fact's turn in flight): after the restart the tree
// finishes, every finished turn was asked of the provider once (only the
// turn in flight at the kill is asked again) and the ledger has a row per
// provider call, each turn settled as answered once.
func TestTeamSurvivesGatewayCrash(t *testing.T) {
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	began := time.Now()
	bin := gatewaytest.Binary(t, "agentryd")
	t.Logf("%s: binaries built", time.Since(began))
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	slow := fakellm.Duration(1500 * time.Millisecond)
	ask := func(peer, task string) []fakellm.ToolCall {
		return []fakellm.ToolCall{fakellm.NewToolCall("ask_"+peer, map[string]string{"task": task})}
	}
	fake.Script(
		fakellm.Rule{Contains: "Written W1.", Reply: "Team done."},
		fakellm.Rule{Contains: "Write it up W1", Reply: "Written W1."},
		fakellm.Rule{Contains: "Research done R1.", ToolCalls: ask("writer", "Write it up W1")},
		fakellm.Rule{Contains: "Fact one F1.", Reply: "Research done R1."},
		fakellm.Rule{Contains: "Check fact F1", Delay: slow, Reply: "Fact one F1."},
		fakellm.Rule{Contains: "Research topic R1", ToolCalls: ask("fact", "Check fact F1")},
		fakellm.Rule{Contains: "Team report", ToolCalls: ask("research", "Research topic R1")},
	)
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	for name, body := range teamAgents {
		os.WriteFile(filepath.Join(ws, "agents", name), []byte(strings.ReplaceAll(body, "{provider: openai, model: exact}", "{provider: ollama, model: llama3.2}")), 0o644)
	}
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
	t.Logf("%s: first gateway up", time.Since(began))
	task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": "Team report", "agent_id": "lead"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	if run.Status != 202 {
		t.Fatalf("start run: %d %s", run.Status, run.Raw)
	}
	runID := int64(run.JSON["id"].(float64))
	// Kill during fact's turn: research and fact (two children) run.
	deadline := time.Now().Add(60 * time.Second)
	for fake.CallCount() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not reach fact's turn (%d provider calls)\n%s", fake.CallCount(), first.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s: kill during fact's turn", time.Since(began))
	first.Kill(t)
	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	t.Logf("%s: second gateway up", time.Since(began))
	var final gatewaytest.Response
	for deadline := time.Now().Add(90 * time.Second); ; {
		final = wbCall(t, base, key, "GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID), nil)
		if st := final.JSON["status"]; st == "finished" || st == "failed" || st == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not finish after the restart: %s\n%s", final.Raw, second.Output)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s: tree ended after the restart", time.Since(began))
	if final.JSON["status"] != "finished" || final.JSON["reply"] != "Team done." {
		t.Fatalf("run after restart: %s", final.Raw)
	}
	children, _ := final.JSON["children"].([]any)
	if len(children) != 3 {
		t.Fatalf("children: %s", final.Raw)
	}
	digests := map[string]int{}
	for _, c := range fake.Calls() {
		digests[c.MessagesDigest]++
	}
	if n := fake.CallCount(); len(digests) != 7 || n > 8 {
		t.Fatalf("provider calls %d (%d distinct turns), want 7 turns and at most the one in flight again", n, len(digests))
	}
	for d, n := range digests {
		if n > 2 {
			t.Errorf("turn %s asked %d times", d, n)
		}
	}
	ids := []string{fmt.Sprintf("taskrun-%d", runID)}
	for _, c := range children {
		ids = append(ids, c.(map[string]any)["run_id"].(string))
	}
	rows, succeeded, seen := 0, 0, map[string]bool{}
	for _, id := range ids {
		r := wbCall(t, base, key, "GET", "/api/v1/costs/calls?limit=1000&run_id="+id, nil)
		calls, _ := r.JSON["calls"].([]any)
		for _, c := range calls {
			row := c.(map[string]any)
			cid := row["call_id"].(string)
			if seen[cid] {
				t.Errorf("call %s twice in the ledger", cid)
			}
			seen[cid] = true
			rows++
			if row["outcome"] == "succeeded" {
				succeeded++
			}
		}
	}
	// A row per provider call (the one cut off by the kill has its own, its
	// repetition another); each of the 7 turns settled as answered once. A
	// call admitted but killed before its request left has a row too (at
	// most the two turns the tree runs at once).
	if n := fake.CallCount(); rows < n || rows > n+2 || succeeded != 7 {
		t.Fatalf("ledger rows of the tree: %d (%d succeeded), provider calls %d: want a row per call, 7 turns settled once", rows, succeeded, n)
	}
}
