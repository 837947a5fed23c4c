package activities

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/workflows"
)

// TestToolStepSendsTheStepsIdempotencyKey runs http_get steps of a task run
// against a real HTTP endpoint that records the Idempotency-Key of each
// request: a step executed twice (a retried activity) sends the same key
// both times, the key is the step input's, and the next step sends
// another.
func TestToolStepSendsTheStepsIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(drivers.IdempotencyKeyHeader))
		mu.Unlock()
		w.Write([]byte("refunded"))
	}))
	defer srv.Close()

	f := newFixture(t, nil)
	f.acts.Toolbox = agent.NewToolbox(netguard.Policy{Enabled: true, AllowLoopback: true}, 5*time.Second)
	sha, err := f.acts.Log.PutSnapshot(context.Background(), workflows.RunSnapshot{Builtins: []string{"http_get"},
		Agent: agent.Input{Provider: "ollama", Model: "m", UserText: "refund", MaxTurns: 4}})
	if err != nil {
		t.Fatal(err)
	}
	f.ref.Snapshot = sha
	args := json.RawMessage(`{"url":"` + srv.URL + `/refund"}`)
	first := f.askTool(t, 1, 1, llm.ToolCall{ID: "call_1", Name: "http_get", Arguments: args})
	for i := 0; i < 2; i++ { // the step and its retry
		if res, err := f.acts.TaskRunTool(context.Background(), first); err != nil || res.IsError {
			t.Fatalf("step %d: %+v %v", i, res, err)
		}
	}
	second := f.askTool(t, 2, 3, llm.ToolCall{ID: "call_2", Name: "http_get", Arguments: args})
	if _, err := f.acts.TaskRunTool(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("%d requests, want 3", len(keys))
	}
	if keys[0] == "" || keys[0] != keys[1] || keys[0] != first.IdempotencyKey() {
		t.Fatalf("the retried step sent %q then %q, want %s twice", keys[0], keys[1], first.IdempotencyKey())
	}
	if keys[2] == keys[0] || keys[2] != second.IdempotencyKey() {
		t.Fatalf("the second step sent %q (first step %q, want %s)", keys[2], keys[0], second.IdempotencyKey())
	}
}
