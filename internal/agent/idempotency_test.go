package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
)

func TestIdempotencyKeyIsStablePerStepAndDistinctAcrossSteps(t *testing.T) {
	key := IdempotencyKey("task-7-a1", 2, 0, "call_abc")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(key) {
		t.Fatalf("key %q is not 32 hex digits", key)
	}
	if again := IdempotencyKey("task-7-a1", 2, 0, "call_abc"); again != key {
		t.Fatalf("the same step gave %s, then %s", key, again)
	}
	seen := map[string]string{key: "base"}
	for name, k := range map[string]string{
		"other run":     IdempotencyKey("task-8-a1", 2, 0, "call_abc"),
		"other attempt": IdempotencyKey("task-7-a2", 2, 0, "call_abc"),
		"other turn":    IdempotencyKey("task-7-a1", 3, 0, "call_abc"),
		"other index":   IdempotencyKey("task-7-a1", 2, 1, "call_abc"),
		"other call":    IdempotencyKey("task-7-a1", 2, 0, "call_abd"),
		// Ids that hold the separators cannot make two steps collide.
		"shifted scope": IdempotencyKey("task-7-a1/t2/0/x", 2, 0, "y"),
		"shifted call":  IdempotencyKey("task-7-a1", 2, 0, "x/t2/0/y"),
	} {
		if prev, dup := seen[k]; dup {
			t.Fatalf("%s has the key of %s", name, prev)
		}
		seen[k] = name
	}
}

// TestHTTPGetSendsIdempotencyKey: http_get sends the key of the call's
// context as Idempotency-Key to a real HTTP endpoint, and no header when
// the context has none.
func TestHTTPGetSendsIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(drivers.IdempotencyKeyHeader))
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	tb := NewToolbox(netguard.Policy{Enabled: true, AllowLoopback: true}, 5*time.Second)
	call := llm.ToolCall{ID: "c1", Name: "http_get", Arguments: json.RawMessage(`{"url":"` + srv.URL + `"}`)}
	key := IdempotencyKey("task-1-a1", 1, 0, "c1")
	for _, ctx := range []context.Context{drivers.WithIdempotencyKey(context.Background(), key), context.Background()} {
		if res, err := tb.Execute(ctx, t.TempDir(), agentdef.KnownBuiltins, call); err != nil || res.IsError {
			t.Fatalf("http_get: %+v %v", res, err)
		}
	}
	if len(got) != 2 || got[0] != key || got[1] != "" {
		t.Fatalf("Idempotency-Key headers %q, want [%s, none]", got, key)
	}
}

// TestLoopNumbersToolCallsOfATurn: each invocation carries its place among
// its turn's calls (chat derives the key from it).
func TestLoopNumbersToolCallsOfATurn(t *testing.T) {
	calls := []llm.ToolCall{{ID: "a", Name: "read_file", Arguments: json.RawMessage(`{"path":"x"}`)},
		{ID: "b", Name: "read_file", Arguments: json.RawMessage(`{"path":"y"}`)}}
	ex := &scripted{box: NewToolbox(netguard.Policy{}, time.Second), dir: t.TempDir(), turns: []*llm.Response{
		{ToolCalls: calls}, {ToolCalls: calls[:1]}, {Content: "done"}}}
	if _, err := Run(ex, Input{UserText: "go", MaxTurns: 3}); err != nil {
		t.Fatal(err)
	}
	var places [][2]int
	for _, inv := range ex.tools {
		places = append(places, [2]int{inv.Turn, inv.Index})
	}
	if len(places) != 3 || places[0] != [2]int{1, 0} || places[1] != [2]int{1, 1} || places[2] != [2]int{2, 0} {
		t.Fatalf("turn/index of the invocations: %v", places)
	}
}

// BenchmarkIdempotencyKey is the cost a tool call pays for its key.
func BenchmarkIdempotencyKey(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = IdempotencyKey("task-123456-a1", i%40, i%4, "call_7f3a9c2e1b4d4f8a")
	}
}
