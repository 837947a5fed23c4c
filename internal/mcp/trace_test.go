package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/mcpserver"
	"github.com/agentryhq/agentry/dev/telemetrytest"
)

// TestCallSpans: every MCP tool call is a tools/call span naming the
// server, its transport and the tool with the outcome (ok, tool_error,
// transport_error); arguments and results appear only with
// telemetry.capture_content.
func TestCallSpans(t *testing.T) {
	rec := telemetrytest.Record(t)
	capture := func(on bool) { telemetrytest.CaptureContent(t, on) }

	ts := httptest.NewServer(mcpserver.Handler(mcpserver.New(mcpserver.Options{})))
	defer ts.Close()
	m := NewManager(loopback(), nil)
	defer m.Close()
	install(t, m, Spec{ID: "web", Transport: TransportHTTP, URL: ts.URL})

	const arg = "ARGUMENT-TEXT-0815"
	capture(false)
	call(t, m, "mcp__web__echo", `{"text":"`+arg+`"}`)
	call(t, m, "mcp__web__fail", `{"message":"`+arg+`"}`)
	capture(true)
	call(t, m, "mcp__web__echo", `{"text":"captured `+arg+`"}`)
	capture(false)
	ts.CloseClientConnections()
	ts.Close()
	// The SDK reports some lost connections as a protocol error ("rejected
	// by transport"), which the manager treats as the tool's error.
	if res, err := m.Call(context.Background(), "mcp__web__echo", json.RawMessage(`{"text":"`+arg+`"}`)); err == nil && !res.IsError {
		t.Fatalf("call to a closed server: %+v", res)
	} else if err != nil && !errors.As(err, new(*TransportError)) {
		t.Fatalf("call to a closed server: %v", err)
	}

	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4: %v", len(spans), spans)
	}
	for i, want := range []struct{ tool, outcome, status string }{
		{"echo", "ok", "Unset"}, {"fail", "tool_error", "Error"}, {"echo", "ok", "Unset"}, {"echo", "transport_error", "Error"},
	} {
		s := spans[i]
		attrs := telemetrytest.Attrs(s)
		if i == 3 && attrs["agentry.mcp.outcome"] == "tool_error" {
			want.outcome = "tool_error"
		}
		if s.Name() != "tools/call "+want.tool || attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != want.tool ||
			attrs["agentry.mcp.server"] != "web" || attrs["agentry.mcp.transport"] != TransportHTTP || attrs["server.address"] != "127.0.0.1" ||
			attrs["agentry.mcp.outcome"] != want.outcome || s.Status().Code.String() != want.status {
			t.Errorf("span %d: %s %v %v", i, s.Name(), s.Status(), attrs)
		}
		if strings.Contains(s.Status().Description, arg) {
			t.Errorf("span %d status carries content: %v", i, s.Status())
		}
		content := strings.Contains(attrs["gen_ai.tool.call.arguments"], arg) && strings.Contains(attrs["gen_ai.tool.call.result"], arg)
		if captured := i == 2; content != captured {
			t.Errorf("span %d: content recorded %v, want %v: %v", i, content, captured, attrs)
		}
		for k, v := range attrs {
			if i != 2 && strings.Contains(v, arg) {
				t.Errorf("span %d attribute %s carries content without capture_content", i, k)
			}
		}
	}
}
