package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/telemetrytest"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
)

// TestToolCallSpans: every tool call is an execute_tool span with the
// tool's name, the model's call id and the outcome; the file content the
// model wrote appears only with telemetry.capture_content.
func TestToolCallSpans(t *testing.T) {
	rec := telemetrytest.Record(t)
	capture := func(on bool) { telemetrytest.CaptureContent(t, on) }
	box := NewToolbox(netguard.Policy{Enabled: true}, time.Second)
	dir := t.TempDir()
	const content = "FILE-CONTENT-4242"
	args, _ := json.Marshal(map[string]string{"path": "a.txt", "content": content})
	run := func(id, name string, args []byte) {
		t.Helper()
		if _, err := box.Execute(context.Background(), dir, agentdef.KnownBuiltins, llm.ToolCall{ID: id, Name: name, Arguments: args}); err != nil {
			t.Fatal(err)
		}
	}
	capture(false)
	run("call_1", "write_file", args)
	run("call_2", "read_file", []byte(`{"path":"../escape"}`))
	capture(true)
	run("call_3", "write_file", args)

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, want := range []struct{ id, tool, outcome string }{{"call_1", "write_file", "ok"}, {"call_2", "read_file", "error"}, {"call_3", "write_file", "ok"}} {
		attrs := telemetrytest.Attrs(spans[i])
		if spans[i].Name() != "execute_tool "+want.tool || attrs["gen_ai.tool.name"] != want.tool || attrs["gen_ai.tool.call.id"] != want.id ||
			attrs["agentry.tool.outcome"] != want.outcome || attrs["gen_ai.operation.name"] != "execute_tool" {
			t.Errorf("span %d: %s %v", i, spans[i].Name(), attrs)
		}
		captured := strings.Contains(attrs["gen_ai.tool.call.arguments"], content)
		if captured != (i == 2) {
			t.Errorf("span %d: content recorded %v: %v", i, captured, attrs)
		}
		if i != 2 {
			for k, v := range attrs {
				if strings.Contains(v, content) {
					t.Errorf("span %d attribute %s carries content", i, k)
				}
			}
		}
	}
}
