package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// A chat reply is sent once the request's writes are in SQLite's redo log,
// before SQLite commits them (storage.commit_linger; 30 s here, so that
// little is committed before the kill). A SIGKILL right after the last
// reply loses none of them: after a restart the session goes on with its
// whole history, and the ledger has a settled row for every call the
// provider answered.
func TestChatRepliesSurviveSIGKILL(t *testing.T) {
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
	fake.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 100}})

	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
	os.WriteFile(filepath.Join(ws, "agents", "exact.yaml"), []byte(exactAgent), 0o644)
	cfgPath := filepath.Join(ws, "config.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`storage: {commit_linger: 30s}
llm:
  default_provider: openai
  providers:
    openai: {type: openai, base_url: %q, default_model: exact}
costs:
  enforcement_mode: hard
  daily_budget_usd: 100
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`, fake.OpenAIBaseURL())), 0o644)
	const key = "crash-chat-key-0123456789"
	env, port, _ := gatewayEnv(t, ws)
	env["AGENTRY_CONFIG_PATH"], env["AGENTRY_SERVER_API_KEY"] = cfgPath, key
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// call sends an API request that must answer 200 and decodes its body.
	call := func(method, path string, body, out any) {
		t.Helper()
		r := wbCall(t, base, key, method, path, body)
		if r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
		}
		if err := json.Unmarshal(r.Raw, out); err != nil {
			t.Fatal(err)
		}
	}
	// chat sends text as user in session (empty: the user's own).
	chat := func(user, session, text string) string {
		t.Helper()
		body := map[string]string{"agent_id": "exact", "user_id": user, "text": text}
		if session != "" {
			body["session_id"] = session
		}
		var reply struct {
			SessionID string `json:"session_id"`
		}
		call("POST", "/api/v1/chat", body, &reply)
		return reply.SessionID
	}
	messagesSent := func(text string) int {
		t.Helper()
		for _, c := range fake.Calls() {
			if c.LastUserMessage == text {
				return c.MessageCount
			}
		}
		t.Fatalf("the provider never saw %q", text)
		return 0
	}

	first := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)
	session := chat("alice", "", "turn 0")
	const turns, fresh = 10, 10
	for i := 1; i < turns; i++ {
		chat("alice", session, fmt.Sprintf("turn %d", i))
	}
	for i := range fresh {
		chat(fmt.Sprintf("user-%d", i), "", fmt.Sprintf("fresh %d", i))
	}
	first.Kill(t) // right after the last reply
	before := messagesSent(fmt.Sprintf("turn %d", turns-1))

	second := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	// Not asserted: a background read may have made the writer commit
	// everything before the kill.
	t.Logf("redo log after the restart: %v", strings.Contains(second.Output.String(), "crash cut off before their commit"))
	chat("alice", session, fmt.Sprintf("turn %d", turns))
	if after := messagesSent(fmt.Sprintf("turn %d", turns)); after != before+2 {
		t.Fatalf("after the restart the provider got %d messages, want %d (the last turn's %d and its two)", after, before+2, before)
	}
	var calls struct {
		Calls []ledgerRow `json:"calls"`
	}
	call("GET", "/api/v1/costs/calls?limit=1000", nil, &calls)
	settled := 0
	for _, r := range calls.Calls {
		if r.Outcome == "succeeded" && r.CostMicros == 10_000 {
			settled++
		}
	}
	if want := turns + fresh + 1; settled != want || len(calls.Calls) != want {
		t.Fatalf("%d settled ledger rows of %d, want %d", settled, len(calls.Calls), want)
	}
}
