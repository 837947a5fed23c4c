package taskruns

import (
	"testing"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
)

// The recorded conversation of a failed attempt becomes the steps a retry
// takes over: every stored answer, and of the last one the tool results
// stored in order; the first call without a result ends the reuse.
func TestReusableSteps(t *testing.T) {
	in := agent.Input{SystemPrompt: "be brief", UserText: "Task #1", MaxTurns: 5}
	answer := func(text string, ids ...string) llm.Message {
		m := llm.Message{Role: llm.RoleAssistant, Content: text}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Name: "write_file", Arguments: []byte(`{"path":"x"}`)})
		}
		return m
	}
	result := func(id string) llm.Message {
		return llm.Message{Role: llm.RoleTool, Content: "wrote " + id, ToolCallID: id}
	}
	opening := []llm.Message{{Role: llm.RoleSystem, Content: "be brief"}, {Role: llm.RoleUser, Content: "Task #1"}}

	if r, n := ReusableSteps(in, opening); n != 0 || len(r.Turns) != 0 {
		t.Fatalf("failed at turn 1: %d messages, %+v", n, r)
	}
	rec := append(append([]llm.Message(nil), opening...), answer("", "a"), result("a"), answer("two", "b", "c"), result("b"))
	r, n := ReusableSteps(in, rec)
	if n != 6 || len(r.Turns) != 2 || r.Turns[0].Seq != 2 || r.Turns[1].Seq != 4 || len(r.Turns[1].Results) != 1 ||
		r.Turns[1].Answer.Content != "two" || len(r.Turns[1].Answer.ToolCalls) != 2 || r.Turns[1].Answer.ToolCalls[1].Arguments != nil {
		t.Fatalf("partial turn 2: %d messages, %+v", n, r)
	}
	// A result stored out of order (another call's) is not taken for this one.
	rec = append(append([]llm.Message(nil), opening...), answer("", "a"), result("z"))
	if r, n := ReusableSteps(in, rec); n != 3 || len(r.Turns) != 1 || len(r.Turns[0].Results) != 0 {
		t.Fatalf("mismatched result: %d messages, %+v", n, r)
	}
}
