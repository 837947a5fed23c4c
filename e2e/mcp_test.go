package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/mcpserver"
	"github.com/agentryhq/agentry/models"
)

const (
	mcpHeaderSecret = "Bearer http-header-secret-4711"
	mcpEnvSecret    = "stdio-env-secret-4712"
	mcpCfgSecret    = "config-header-secret-4713"
)

// runMCPServerIfAsked turns this test binary into the dev MCP server on
// stdio when a managed wrapper script starts it.
func runMCPServerIfAsked() {
	if os.Getenv("AGENTRY_TEST_MCPSERVER") != "stdio" {
		return
	}
	err := mcpserver.RunStdio(context.Background(), mcpserver.New(mcpserver.Options{CallLog: os.Getenv("MCPSERVER_CALL_LOG")}))
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// startMCPHTTP serves the dev MCP server over streamable HTTP, requiring
// the Authorization header.
func startMCPHTTP(t *testing.T, auth string) string {
	h := mcpserver.Handler(mcpserver.New(mcpserver.Options{}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth != "" && r.Header.Get("Authorization") != auth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	// The gateway's client keeps an SSE stream open: cut it, or Close waits.
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return ts.URL
}

// managedStdioServer writes mcp-servers/<name>, a script that runs this
// test binary as the stdio MCP server.
func managedStdioServer(t *testing.T, ws, name string) {
	dir := filepath.Join(ws, "mcp-servers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nAGENTRY_TEST_MCPSERVER=stdio exec %q -test.run='^$' \"$@\"\n", exe)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

const mcpAgents = "id: tooluser\nsystem_prompt: Use tools.\nmcp: [web, local]\n"

func startMCPGateway(t *testing.T, extra string) *gatewaytest.Gateway {
	ws := t.TempDir()
	managedStdioServer(t, ws, "devserver")
	return gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Agents: map[string]string{
		"tooluser.yaml": mcpAgents, "all.yaml": "id: all\nmcp: ['*']\n", "none.yaml": "id: none\n",
	}, Config: "runtime: {ssrf: {enabled: true, allow_loopback: true}}\n" + extra})
}

func TestMCPRegisterChatAndSecrets(t *testing.T) {
	cfgURL := startMCPHTTP(t, mcpCfgSecret)
	g := startMCPGateway(t, fmt.Sprintf("mcp:\n  fromcfg: {url: %q, headers: {Authorization: %q}}\n", cfgURL, mcpCfgSecret))
	webURL := startMCPHTTP(t, mcpHeaderSecret)

	web := map[string]any{"transport": "http", "url": webURL, "headers": map[string]string{"Authorization": mcpHeaderSecret}}
	r := g.Do("PUT", "/api/v1/mcp/own/web", web)
	if r.Status != 201 {
		t.Fatalf("first PUT: %d %s", r.Status, r.Raw)
	}
	if tools := fmt.Sprint(r.JSON["tools"]); !strings.Contains(tools, "echo") || r.JSON["status"] != "connected" {
		t.Fatalf("PUT answer lists the tools: %s", r.Raw)
	}
	r = g.Do("PUT", "/api/v1/mcp/own/web", web)
	if r.Status != 200 || r.JSON["status"] != "connected" {
		t.Fatalf("repeated PUT is an update: %d %s", r.Status, r.Raw)
	}
	r = g.Do("PUT", "/api/v1/mcp/own/local", map[string]any{"transport": "stdio", "command": "devserver", "env": map[string]string{"DEV_TOKEN": mcpEnvSecret}})
	if r.Status != 201 {
		t.Fatalf("stdio PUT: %d %s", r.Status, r.Raw)
	}
	list := g.Do("GET", "/api/v1/mcp/own", nil)
	if list.Status != 200 || strings.Count(string(list.Raw), `"connected"`) < 2 {
		t.Fatalf("list: %s", list.Raw)
	}

	// Chat: the agent is offered its servers' tools and calls one.
	g.Fake.Script(
		fakellm.Rule{Contains: "sum please", Times: 1, ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("mcp__web__add", map[string]any{"a": 2, "b": 40})}},
		fakellm.Rule{Contains: "42", Times: 1, Reply: "The sum is 42."},
		fakellm.Rule{Contains: "bad args", Times: 1, ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("mcp__local__add", map[string]any{"a": "two"})}},
		fakellm.Rule{Contains: "input schema", Times: 1, Reply: "The tool refused my arguments."},
	)
	r = g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "tooluser", "text": "sum please"})
	if r.Status != 200 || r.JSON["reply"] != "The sum is 42." {
		calls := g.Fake.Calls()
		t.Fatalf("chat: %d %s\nlast call: %s", r.Status, r.Raw, calls[len(calls)-1].Body)
	}
	first := g.Fake.Calls()[len(g.Fake.Calls())-2]
	if !slices.Contains(first.Tools, "mcp__web__add") || !slices.Contains(first.Tools, "mcp__local__echo") || slices.ContainsFunc(first.Tools, func(s string) bool { return strings.HasPrefix(s, "mcp__fromcfg__") }) {
		t.Fatalf("tools offered: %v", first.Tools)
	}
	r = g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "tooluser", "text": "bad args"})
	if r.Status != 200 || r.JSON["reply"] != "The tool refused my arguments." {
		t.Fatalf("schema failure goes back to the model: %d %s", r.Status, r.Raw)
	}
	n := g.Fake.CallCount()
	g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "all", "text": "hello"})
	calls := g.Fake.Calls()
	if len(calls) != n+1 || !slices.Contains(calls[n].Tools, "mcp__fromcfg__echo") {
		t.Fatalf("[*] offers every server's tools: %v", calls[len(calls)-1].Tools)
	}
	g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "none", "text": "hello"})
	if last := g.Fake.Calls()[len(g.Fake.Calls())-1]; len(last.Tools) != 0 {
		t.Fatalf("an agent without mcp: gets no MCP tools: %v", last.Tools)
	}

	// Secrets: never in answers, GET /config or the log.
	for _, path := range []string{"/api/v1/mcp/own", "/api/v1/mcp/own/web", "/api/v1/mcp/own/local", "/api/v1/mcp/own/fromcfg", "/api/v1/config", "/api/v1/logs?lines=5000"} {
		r := g.Do("GET", path, nil)
		if r.Status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
		}
		for _, secret := range []string{mcpHeaderSecret, mcpEnvSecret, mcpCfgSecret, "http-header-secret"} {
			if strings.Contains(string(r.Raw), secret) {
				t.Fatalf("GET %s leaks a secret: %s", path, r.Raw)
			}
		}
	}
	if r := g.Do("GET", "/api/v1/mcp/own/local", nil); !strings.Contains(string(r.Raw), "DEV_TOKEN") {
		t.Fatalf("env names are shown: %s", r.Raw)
	}

	// Config servers are not the API's to change.
	if r := g.Do("DELETE", "/api/v1/mcp/own/fromcfg", nil); r.Status != 409 {
		t.Fatalf("delete config server: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("DELETE", "/api/v1/mcp/own/web", nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("GET", "/api/v1/mcp/own/web", nil); r.Status != 404 {
		t.Fatalf("deleted server: %d", r.Status)
	}
	if r := g.Do("DELETE", "/api/v1/mcp/own/web", nil); r.Status != 404 {
		t.Fatalf("second delete: %d", r.Status)
	}
	if r := g.DoAs(viewerKeyMCP, "GET", "/api/v1/mcp/own", nil); r.Status != 401 && r.Status != 403 {
		t.Fatalf("non-admin: %d", r.Status)
	}
}

const viewerKeyMCP = "not-a-key-at-all-000000"

func TestMCPRegistrationBadInputAndPolicy(t *testing.T) {
	g := startMCPGateway(t, "")
	ws := g.Workspace
	outside := filepath.Join(ws, "outside-server")
	if err := os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "mcp-servers", "escape")); err != nil {
		t.Fatal(err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>not mcp</html>")) }))
	defer html.Close()
	malformed := httptest.NewServer(mcpserver.Handler(mcpserver.NewMalformed()))
	defer func() { malformed.CloseClientConnections(); malformed.Close() }()

	cases := []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"unreachable", map[string]any{"transport": "http", "url": closedURL}, 502, "mcp server bad"},
		{"not mcp", map[string]any{"transport": "http", "url": html.URL}, 502, "mcp server bad"},
		{"malformed tool list", map[string]any{"transport": "http", "url": malformed.URL}, 502, "malformed tool list"},
		{"outside mcp-servers", map[string]any{"transport": "stdio", "command": outside}, 403, "outside the managed directory"},
		{"symlink out", map[string]any{"transport": "stdio", "command": "escape"}, 403, "outside the managed directory"},
		{"missing command", map[string]any{"transport": "stdio", "command": "nope"}, 403, "does not resolve"},
		{"unknown field", map[string]any{"transport": "http", "url": "http://x", "token": "y"}, 400, "unknown field"},
		{"bad transport", map[string]any{"transport": "sse", "url": "http://x"}, 400, "transport"},
		{"mixed", map[string]any{"transport": "http", "url": "http://x", "command": "y"}, 400, "transport"},
		{"not an object", "[1,2]", 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := g.Do("PUT", "/api/v1/mcp/own/bad", tc.body)
			if r.Status != tc.status || !strings.Contains(fmt.Sprint(r.JSON["error"]), tc.want) {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			if tc.status == 502 && r.JSON["server"] != "bad" {
				t.Fatalf("502 names the server: %s", r.Raw)
			}
		})
	}
	if r := g.Do("PUT", "/api/v1/mcp/own/Bad__Id", map[string]any{"transport": "http", "url": "http://x"}); r.Status != 400 {
		t.Fatalf("bad id: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("GET", "/api/v1/mcp/own/bad", nil); r.Status != 404 {
		t.Fatalf("nothing stored after refusals: %d %s", r.Status, r.Raw)
	}

	team := startMCPGateway(t, "server: {edition: team}\n")
	if r := team.Do("PUT", "/api/v1/mcp/own/local", map[string]any{"transport": "stdio", "command": "devserver"}); r.Status != 403 || r.JSON["code"] != "policy" {
		t.Fatalf("team refuses stdio: %d %s", r.Status, r.Raw)
	}
	if r := team.Do("PUT", "/api/v1/mcp/own/web", map[string]any{"transport": "http", "url": startMCPHTTP(t, "")}); r.Status != 403 || !strings.Contains(string(r.Raw), "https") {
		t.Fatalf("team refuses http://: %d %s", r.Status, r.Raw)
	}
}

func TestMCPRegistrationSurvivesRestart(t *testing.T) {
	ws := t.TempDir()
	managedStdioServer(t, ws, "devserver")
	opts := gatewaytest.Options{Workspace: ws, Agents: map[string]string{"tooluser.yaml": mcpAgents},
		Config: "runtime: {ssrf: {enabled: true, allow_loopback: true}}\n"}
	g := gatewaytest.Start(t, opts)
	if r := g.Do("PUT", "/api/v1/mcp/own/local", map[string]any{"transport": "stdio", "command": "devserver", "env": map[string]string{"DEV_TOKEN": mcpEnvSecret}}); r.Status != 201 {
		t.Fatalf("PUT: %d %s", r.Status, r.Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g.Shutdown(ctx)
	// The sealed row holds no clear value.
	files, _ := filepath.Glob(filepath.Join(ws, "data", "agentry.db*"))
	for _, f := range files {
		if db, _ := os.ReadFile(f); strings.Contains(string(db), mcpEnvSecret) {
			t.Fatalf("env value stored in clear in %s", f)
		}
	}
	g2 := gatewaytest.Start(t, opts)
	waitUntil(t, 30*time.Second, "stored server reconnects", func() bool {
		r := g2.Do("GET", "/api/v1/mcp/own/local", nil)
		return r.Status == 200 && r.JSON["status"] == "connected"
	})
	g2.Fake.Script(
		fakellm.Rule{Contains: "echo please", Times: 1, ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("mcp__local__echo", map[string]any{"text": "after restart"})}},
		fakellm.Rule{Contains: "after restart", Times: 1, Reply: "done"},
	)
	if r := g2.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "tooluser", "text": "echo please"}); r.JSON["reply"] != "done" {
		t.Fatalf("chat after restart: %d %s", r.Status, r.Raw)
	}
}

// TestMCPTaskRunToolEvents: a task run calls MCP tools as durable steps;
// each call is a run.tool event (server, tool, is_error, no content) and a
// server's secret echoed in a tool error reaches neither model nor events.
func TestMCPTaskRunToolEvents(t *testing.T) {
	g := startMCPGateway(t, "")
	if r := g.Do("PUT", "/api/v1/mcp/own/local", map[string]any{"transport": "stdio", "command": "devserver", "env": map[string]string{"DEV_TOKEN": mcpEnvSecret}}); r.Status != 201 {
		t.Fatalf("PUT: %d %s", r.Status, r.Raw)
	}
	g.Fake.Script(
		fakellm.Rule{Contains: "Echo job", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("mcp__local__echo", map[string]any{"text": "from task"}),
			fakellm.NewToolCall("mcp__local__fail", map[string]any{"message": "leaked " + mcpEnvSecret}),
		}},
		fakellm.Rule{Contains: "leaked", Times: 1, Reply: "Echoed."},
	)
	id := wbCreateTask(t, g, map[string]any{"title": "Echo job", "agent_id": "tooluser"})
	stream := wbSubscribe(t, g, fmt.Sprintf("task_id=%d&type=run.", id), "")
	r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, r, 202, "start run")
	run := wbWaitRun(t, g, id, wbID(t, r), 60*time.Second, "finished", "failed")
	if run["status"] != "finished" || run["reply"] != "Echoed." {
		t.Fatalf("run %v", run)
	}
	frames := wbCollect(t, stream, "run.finished", 10*time.Second)
	frames = wbWithoutTurns(frames) // the turns are checked by TestWorkboardRunProducesArtifactsAndEvents
	if fmt.Sprint(wbTypes(frames)) != "[run.started run.tool run.tool run.finished]" {
		t.Fatalf("events %v", wbTypes(frames))
	}
	echo, fail := frames[1].Event.PayloadMap(), frames[2].Event.PayloadMap()
	if echo["server"] != "local" || echo["server_tool"] != "echo" || echo["kind"] != "mcp" || echo["is_error"] != false ||
		fail["server_tool"] != "fail" || fail["is_error"] != true {
		t.Fatalf("run.tool payloads %v %v", echo, fail)
	}
	for _, f := range frames {
		if raw, _ := json.Marshal(f.Event); strings.Contains(string(raw), mcpEnvSecret) || strings.Contains(string(raw), "from task") {
			t.Fatalf("event carries tool content or a secret: %s", raw)
		}
	}
	last := g.Fake.Calls()[len(g.Fake.Calls())-1]
	// (The scripted model itself wrote the secret into its call's
	// arguments; the tool result it reads back is what must be masked.)
	if strings.Contains(string(last.Body), "error: leaked "+mcpEnvSecret) || !strings.Contains(string(last.Body), "error: leaked [REDACTED]") {
		t.Fatalf("the tool result the model read is not scrubbed: %s", last.Body)
	}
}

// TestMCPScheduledFiringCallsToolAsActivity: a cron agent's firing calls an
// MCP tool (the stdio dev server); the call is a ScheduledTool activity in
// the firing's history and the reply built on its result is delivered.
func TestMCPScheduledFiringCallsToolAsActivity(t *testing.T) {
	rcv := newSigReceiver(t, "")
	ws := t.TempDir()
	managedStdioServer(t, ws, "devserver")
	agentDef := strings.Replace(reporterAgent, "@every 2s", "0 0 1 1 *", 1) + "mcp: [local]\n"
	g := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Agents: map[string]string{"reporter.yaml": agentDef},
		Config: deliveryConfig(rcv.URL(), "", "") + fmt.Sprintf("mcp:\n  local: {transport: stdio, command: %q}\n", filepath.Join(ws, "mcp-servers", "devserver"))})
	deleteScheduleAfter(t, gatewaytest.SharedTemporal(t), g.Config.Temporal.TaskQueue+":schedule:reporter")
	g.Fake.Script(
		fakellm.Rule{Contains: "scheduled echo", Times: 1, Reply: "Reported after the tool."},
		fakellm.Rule{Contains: "status report please", Times: 1, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("mcp__local__echo", map[string]any{"text": "scheduled echo"}),
		}},
	)
	tr := g.Do("POST", "/api/v1/schedules/reporter/trigger", nil)
	if tr.Status != 202 {
		t.Fatalf("trigger: %d %s", tr.Status, tr.Raw)
	}
	wid := tr.JSON["workflow_id"].(string)
	var run models.ScheduleRun
	waitUntil(t, 60*time.Second, "the firing's end", func() bool {
		return g.Store.DB.First(&run, "workflow_id = ?", wid).Error == nil && run.Status != "running"
	})
	if run.Status != "succeeded" {
		t.Fatalf("firing %+v (provider calls %d)", run, g.Fake.CallCount())
	}
	waitUntil(t, 30*time.Second, "the delivered reply", func() bool { return len(scheduledBodies(rcv)) >= 1 })
	if b := scheduledBodies(rcv)[0]; b["text"] != "Reported after the tool." {
		t.Fatalf("delivered %v", b)
	}
	tools := 0
	iter := g.Temporal.GetWorkflowHistory(context.Background(), wid, "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "ScheduledTool" {
			tools++
		}
	}
	if tools != 1 {
		t.Fatalf("%d ScheduledTool activities in the firing's history, want 1", tools)
	}
}
