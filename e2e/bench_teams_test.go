package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestBenchTeamTree logs the figures of docs/benchmarks.md "Agent teams":
// the delegation latency (the parent's start of a child workflow to the
// child's first LLM turn starting) p50/p90 over a tree of 4x5 children on
// the real embedded server with the fake LLM, and the history sizes of the
// parents (the root with 4 children, each mid with 5; 20 leaves in all).
// Skipped unless AGENTRY_BENCH_TEAMS=1: it measures, it asserts only that
// the tree finished.
//
//	AGENTRY_BENCH_TEAMS=1 go test ./e2e -run TestBenchTeamTree -v
func TestBenchTeamTree(t *testing.T) {
	if os.Getenv("AGENTRY_BENCH_TEAMS") == "" {
		t.Skip("set AGENTRY_BENCH_TEAMS=1 to measure the team figures")
	}
	fake := startFake(t)
	ask := func(peer, prefix string, n int) []fakellm.ToolCall {
		var calls []fakellm.ToolCall
		for i := 1; i <= n; i++ {
			calls = append(calls, fakellm.NewToolCall("ask_"+peer, map[string]string{"task": fmt.Sprintf("%s %d", prefix, i)}))
		}
		return calls
	}
	fake.Script(
		fakellm.Rule{Contains: "mid done", Reply: "all done"},
		fakellm.Rule{Contains: "leaf done", Reply: "mid done"},
		fakellm.Rule{Contains: "Leaf part", Reply: "leaf done"},
		fakellm.Rule{Contains: "Mid part", ToolCalls: ask("leaf", "Leaf part", 5)},
		fakellm.Rule{Contains: "Bench team", ToolCalls: ask("mid", "Mid part", 4)},
	)
	agents := map[string]string{
		"broot.yaml": "id: broot\nllm: {provider: openai, model: exact}\npeers: [mid]\nmax_turns: 4\n",
		"mid.yaml":   "id: mid\ndescription: splits\nllm: {provider: openai, model: exact}\npeers: [leaf]\nmax_turns: 4\n",
		"leaf.yaml":  "id: leaf\ndescription: answers\nllm: {provider: openai, model: exact}\nmax_turns: 2\n",
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: agents, Config: teamConfig})
	task := g.Do("POST", wb+"/tasks", map[string]any{"title": "Bench team", "agent_id": "broot"})
	wbWantStatus(t, task, 201, "create task")
	taskID := int64(task.JSON["id"].(float64))
	run := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, run, 202, "start run")
	runID := int64(run.JSON["id"].(float64))
	done := wbWaitRun(t, g, taskID, runID, 120*time.Second, "finished", "failed", "cancelled")
	if done["status"] != "finished" || done["reply"] != "all done" {
		t.Fatalf("run: %v", done)
	}
	children, _ := done["children"].([]any)
	if len(children) != 24 {
		t.Fatalf("tree has %d children, want 24", len(children))
	}

	history := func(wid string) []*historypb.HistoryEvent {
		var evs []*historypb.HistoryEvent
		it := g.Temporal.GetWorkflowHistory(context.Background(), wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return evs
	}
	size := func(evs []*historypb.HistoryEvent) int {
		n := 0
		for _, ev := range evs {
			n += proto.Size(ev)
		}
		return n
	}
	var latencies []time.Duration
	// parent workflow id -> its history; the children's start times from it.
	measure := func(parent string) []*historypb.HistoryEvent {
		evs := history(parent)
		for _, ev := range evs {
			a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes()
			if a == nil {
				continue
			}
			started := ev.GetEventTime().AsTime()
			for _, cev := range history(a.GetWorkflowId()) {
				if cev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED {
					latencies = append(latencies, cev.GetEventTime().AsTime().Sub(started))
					break
				}
			}
		}
		return evs
	}
	rootWID := ""
	if w, ok := done["workflow_id"].(string); ok {
		rootWID = w
	} else {
		rootWID = fmt.Sprintf("task-%d", taskID)
	}
	rootEvs := measure(rootWID)
	t.Logf("root (4 children): %d events, %d bytes", len(rootEvs), size(rootEvs))
	for _, c := range children {
		c := c.(map[string]any)
		if c["agent_id"] != "mid" {
			continue
		}
		evs := measure(c["workflow_id"].(string))
		t.Logf("mid %s (5 children): %d events, %d bytes", c["workflow_id"], len(evs), size(evs))
	}
	slices.Sort(latencies)
	if len(latencies) != 24 {
		t.Fatalf("measured %d delegations, want 24", len(latencies))
	}
	t.Logf("delegation latency (child start initiated -> first LLM turn started) over %d children: p50 %s, p90 %s, max %s",
		len(latencies), latencies[len(latencies)/2], latencies[len(latencies)*9/10], latencies[len(latencies)-1])
}
