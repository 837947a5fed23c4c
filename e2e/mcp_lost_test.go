package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/mcpserver"
)

// TestMCPLostServerRetriesTheToolStep: in a task run, an MCP server over
// streamable HTTP that is down for a tool call (503 from its front, which
// the go-sdk reports as "rejected by transport") makes the tool step fail
// and retry on a fresh session, not hand the model a transport error as
// the tool's answer: down for the first attempt, the run finishes with one
// call that reached the tool; down for every attempt, the run fails with a
// reason naming the server.
func TestMCPLostServerRetriesTheToolStep(t *testing.T) {
	h := mcpserver.Handler(mcpserver.New(mcpserver.Options{}))
	var downFor, refused, reached atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				if downFor.Add(-1) >= 0 {
					refused.Add(1)
					http.Error(w, "upstream down", http.StatusServiceUnavailable)
					return
				}
				reached.Add(1)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })

	g := startMCPGateway(t, "")
	if r := g.Do("PUT", "/api/v1/mcp/own/web", map[string]any{"transport": "http", "url": ts.URL}); r.Status != 201 {
		t.Fatalf("PUT: %d %s", r.Status, r.Raw)
	}
	g.Fake.Script(
		fakellm.Rule{Contains: "Flaky echo", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("mcp__web__echo", map[string]any{"text": "made it through"}),
		}},
		fakellm.Rule{Contains: "made it through", Reply: "Echoed after a retry."},
	)
	runTask := func(title string) map[string]any {
		t.Helper()
		id := wbCreateTask(t, g, map[string]any{"title": title, "agent_id": "tooluser"})
		r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
		wbWantStatus(t, r, 202, "start run")
		return wbWaitRun(t, g, id, wbID(t, r), 60*time.Second, "finished", "failed")
	}

	downFor.Store(1)
	run := runTask("Flaky echo")
	if run["status"] != "finished" || run["reply"] != "Echoed after a retry." || refused.Load() != 1 || reached.Load() != 1 {
		t.Fatalf("down for one attempt: run %v, refused %d, reached %d", run, refused.Load(), reached.Load())
	}
	for _, c := range g.Fake.Calls() {
		if strings.Contains(string(c.Body), "rejected by transport") || strings.Contains(string(c.Body), "Service Unavailable") {
			t.Fatalf("the model read a transport error: %s", c.Body)
		}
	}

	downFor.Store(1000)
	refused.Store(0)
	run = runTask("Flaky echo, never back")
	if msg, _ := run["error"].(string); run["status"] != "failed" || !strings.Contains(msg, "mcp server web") || !strings.Contains(msg, "gave up after 3 attempts") {
		t.Fatalf("down for every attempt: run %v", run)
	}
	if refused.Load() != 3 || reached.Load() != 1 {
		t.Fatalf("down for every attempt: refused %d, reached %d, want 3 and still 1", refused.Load(), reached.Load())
	}
}
