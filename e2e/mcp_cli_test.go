package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestCLIMCPAddListRemove drives `agentry mcp add|list|remove` against a
// real gateway and real MCP servers (HTTP with a secret header, stdio with
// a secret env value): human and --json output, repeated add is an
// update, secrets never printed, refusals name the server and store
// nothing, usage mistakes exit 2, and no local file changes whatever
// happens (a failed add never falls back to editing config.yaml).
func TestCLIMCPAddListRemove(t *testing.T) {
	g := startMCPGateway(t, "")
	webURL := startMCPHTTP(t, mcpHeaderSecret)
	h := newHome(t)
	h.writeConfig("server: {port: 1}\n") // a local workspace the client must leave alone
	before := snapshot(t, h.Home)
	env := map[string]string{"AGENTRY_GATEWAY": g.URL(), "AGENTRY_API_KEY": gatewaytest.TestAPIKey}
	noSecret := func(r result, what string) {
		t.Helper()
		for _, s := range []string{mcpHeaderSecret, mcpEnvSecret, "http-header-secret"} {
			if strings.Contains(r.Stdout+r.Stderr, s) {
				t.Fatalf("%s prints a secret:\n%s", what, r)
			}
		}
	}

	r := h.runWith(env, "", "mcp", "add", "--name", "web", "--transport", "http", "--url", webURL, "--header", "Authorization: "+mcpHeaderSecret)
	expectCode(t, r, 0, "add http")
	expectContains(t, r.Stderr, "Contacting MCP server web", "progress")
	expectContains(t, r.Stdout, "MCP server web registered (connected)", "result")
	expectContains(t, r.Stdout, "echo", "tool names")
	noSecret(r, "add http")
	r = h.runWith(env, "", "--json", "mcp", "add", "--name", "web", "--transport", "http", "--url", webURL, "--header", "Authorization: "+mcpHeaderSecret)
	expectCode(t, r, 0, "repeated add")
	if v := r.JSON(t); v["id"] != "web" || v["status"] != "connected" {
		t.Fatalf("repeated add json: %s", r)
	}
	noSecret(r, "repeated add")
	r = h.runWith(env, "", "--json", "mcp", "add", "--name", "local", "--transport", "stdio", "--command", "devserver", "--env", "DEV_TOKEN="+mcpEnvSecret)
	expectCode(t, r, 0, "add stdio")
	if v := r.JSON(t); v["transport"] != "stdio" || v["status"] != "connected" || !strings.Contains(fmt.Sprint(v["tools"]), "slow") {
		t.Fatalf("add stdio json: %s", r)
	}
	noSecret(r, "add stdio")

	r = h.runWith(env, "", "mcp", "list")
	expectCode(t, r, 0, "list")
	for _, want := range []string{"ID", "web", "local", "mcp-servers", "connected"} {
		expectContains(t, r.Stdout, want, "list table")
	}
	noSecret(r, "list")
	r = h.runWith(env, "", "--json", "mcp", "list")
	expectCode(t, r, 0, "list json")
	expectContains(t, r.Stdout, `"DEV_TOKEN"`, "env names are shown")
	noSecret(r, "list json")

	// Refusals: the gateway's reason and the server id, nothing stored.
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	outside := filepath.Join(g.Workspace, "outside-server")
	os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--transport", "http", "--url", closedURL}, "bad"},
		{[]string{"--transport", "stdio", "--command", outside}, "outside the managed directory"},
		{[]string{"--transport", "stdio", "--command", "nope"}, "does not resolve"},
	} {
		r := h.runWith(env, "", append([]string{"mcp", "add", "--name", "bad"}, tc.args...)...)
		expectCode(t, r, 1, "refused add "+strings.Join(tc.args, " "))
		expectContains(t, r.Stderr, tc.want, "refusal reason")
	}
	if r := g.Do("GET", "/api/v1/mcp/own/bad", nil); r.Status != 404 {
		t.Fatalf("a refused add stored something: %d %s", r.Status, r.Raw)
	}
	for _, args := range [][]string{
		{"mcp", "add", "--transport", "http", "--url", webURL},
		{"mcp", "add", "--name", "x", "--transport", "sse", "--url", webURL},
		{"mcp", "add", "--name", "x", "--transport", "http"},
		{"mcp", "add", "--name", "x", "--transport", "http", "--url", webURL, "--header", "no colon"},
		{"mcp", "add", "--name", "x", "--transport", "stdio", "--command", "devserver", "--url", webURL},
		{"mcp", "remove"},
	} {
		r := h.runWith(env, "", args...)
		expectCode(t, r, 2, strings.Join(args, " "))
	}

	r = h.runWith(env, "", "mcp", "remove", "web")
	expectCode(t, r, 0, "remove")
	expectContains(t, r.Stdout, "MCP server web removed", "remove result")
	r = h.runWith(env, "", "--json", "mcp", "remove", "web")
	expectCode(t, r, 1, "second remove")
	expectContains(t, r.Stdout+r.Stderr, "web", "names the server")
	r = h.runWith(env, "", "--json", "mcp", "list")
	if strings.Contains(r.Stdout, `"web"`) || !strings.Contains(r.Stdout, `"local"`) {
		t.Fatalf("list after remove: %s", r)
	}

	// A gateway that cannot be reached: an error naming it, and (like every
	// other case above) no local file edited instead.
	r = h.runWith(map[string]string{"AGENTRY_GATEWAY": "http://127.0.0.1:1", "AGENTRY_API_KEY": gatewaytest.TestAPIKey}, "",
		"mcp", "add", "--name", "web", "--transport", "http", "--url", webURL)
	expectCode(t, r, 1, "add against an unreachable gateway")
	expectContains(t, r.Stderr, "127.0.0.1:1", "names the gateway")
	sameTree(t, before, snapshot(t, h.Home), "after mcp commands")
}

// TestCLIMCPAddInTmux runs `agentry mcp add` in a real terminal against a
// server that is slow to answer: the progress line shows while the
// gateway contacts the server, then the result replaces the wait; a
// refused add shows the reason. Skipped when tmux is not installed
// (failed where services are required).
func TestCLIMCPAddInTmux(t *testing.T) {
	tmux := needTmux(t)
	g := startMCPGateway(t, "")
	inner := startMCPHTTP(t, "")
	// The first request (initialize) waits until the test saw the progress
	// line, so the screen shows the wait.
	var release atomic.Bool
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 300 && !release.Load(); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		proxyTo(w, r, inner)
	}))
	t.Cleanup(func() { slow.CloseClientConnections(); slow.Close() })
	h := newHome(t)

	prefix := fmt.Sprintf("AGENTRY_GATEWAY=%s AGENTRY_API_KEY=%s %s", g.URL(), gatewaytest.TestAPIKey, h.bin)
	var sawProgress bool
	pane := runInTmuxWatching(t, tmux, h,
		fmt.Sprintf(`%s mcp add --name web --transport http --url %s --header 'Authorization: %s'; echo "EXIT""=$?"`, prefix, slow.URL, mcpHeaderSecret),
		func(screen string, _ func(string)) {
			if strings.Contains(screen, "Contacting MCP server web") && !strings.Contains(screen, "registered") {
				sawProgress = true
				release.Store(true)
			}
		})
	if !sawProgress {
		t.Fatalf("the progress line never showed alone:\n%s", pane)
	}
	if !strings.Contains(pane, "MCP server web registered (connected)") || !strings.Contains(pane, "EXIT=0") {
		t.Fatalf("final screen:\n%s", pane)
	}
	if r := g.Do("GET", "/api/v1/mcp/own/web", nil); r.Status != 200 || r.JSON["status"] != "connected" {
		t.Fatalf("registered through the terminal: %d %s", r.Status, r.Raw)
	}

	pane = runInTmuxWatching(t, tmux, h,
		fmt.Sprintf(`%s mcp add --name bad --transport stdio --command /bin/true; echo "EXIT""=$?"`, prefix), nil)
	if !strings.Contains(pane, "outside the managed directory") || !strings.Contains(pane, "EXIT=1") {
		t.Fatalf("refusal screen:\n%s", pane)
	}
	// The header value typed on the command line is never echoed back
	// (only the shell's own copy of the command line holds it).
	if n := strings.Count(pane, "http-header-secret"); n > 1 {
		t.Fatalf("the secret shows %d times:\n%s", n, pane)
	}
}

// proxyTo forwards one request to base (same path and headers), streaming
// the answer: the MCP SDK answers POSTs with SSE.
func proxyTo(w http.ResponseWriter, r *http.Request, base string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
