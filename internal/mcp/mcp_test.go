package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/mcpserver"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/scrub"
)

// The test binary doubles as the stdio MCP server: a real SDK server in a
// child process.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTRY_TEST_MCPSERVER") == "stdio" {
		if err := mcpserver.RunStdio(context.Background(), mcpserver.New(mcpserver.Options{})); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func stdioSpec(id string) Spec {
	return Spec{ID: id, Transport: TransportStdio, Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env: map[string]string{"AGENTRY_TEST_MCPSERVER": "stdio", "SECRET_TOKEN": "stdio-secret-value"}}
}

func loopback() Policy { return Policy{SSRF: netguard.Policy{Enabled: true, AllowLoopback: true}} }

func install(t *testing.T, m *Manager, spec Spec) {
	t.Helper()
	p, err := m.Dial(context.Background(), spec)
	if err != nil {
		t.Fatalf("dial %s: %v", spec.ID, err)
	}
	m.Install(p)
}

func call(t *testing.T, m *Manager, name, args string) Result {
	t.Helper()
	res, err := m.Call(context.Background(), name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func TestStdioServerToolsCallsAndValidation(t *testing.T) {
	m := NewManager(loopback(), nil)
	defer m.Close()
	install(t, m, stdioSpec("dev"))

	names := []string{}
	for _, tl := range m.Tools([]string{"dev"}) {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"mcp__dev__echo", "mcp__dev__add", "mcp__dev__slow", "mcp__dev__fail"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}
	if got := m.Tools([]string{"other"}); len(got) != 0 {
		t.Fatalf("agent without opt-in got %v", got)
	}
	if got := m.Tools([]string{"*"}); len(got) != len(names) {
		t.Fatalf("[*] gave %d tools, want %d", len(got), len(names))
	}

	if res := call(t, m, "mcp__dev__echo", `{"text":"hi"}`); res.IsError || res.Content != "hi" {
		t.Fatalf("echo: %+v", res)
	}
	if res := call(t, m, "mcp__dev__add", `{"a":2,"b":3}`); res.Content != "5" {
		t.Fatalf("add: %+v", res)
	}
	// Arguments that fail the schema never reach the server: the model
	// gets the validation error as the result.
	res := call(t, m, "mcp__dev__add", `{"a":"two","b":3}`)
	if !res.IsError || !strings.Contains(res.Content, "input schema of add") {
		t.Fatalf("bad arguments: %+v", res)
	}
	// A tool's own error is a result, not a transport failure.
	res = call(t, m, "mcp__dev__fail", `{"message":"no luck"}`)
	if !res.IsError || !strings.Contains(res.Content, "no luck") {
		t.Fatalf("fail: %+v", res)
	}
	if res := call(t, m, "mcp__dev__nope", `{}`); !res.IsError {
		t.Fatalf("unknown tool: %+v", res)
	}

	// notifications/tools/list_changed refreshes the list.
	call(t, m, "mcp__dev__grow", `{"name":"sprout"}`)
	waitFor(t, "sprout offered", func() bool {
		return slices.ContainsFunc(m.Tools([]string{"dev"}), func(tl llm.Tool) bool { return tl.Name == "mcp__dev__sprout" })
	})
	if res := call(t, m, "mcp__dev__sprout", `{}`); res.Content != "sprout ran" {
		t.Fatalf("sprout: %+v", res)
	}

	st, _ := m.Get("dev")
	b, _ := json.Marshal(st)
	if strings.Contains(string(b), "stdio-secret-value") || !strings.Contains(string(b), "SECRET_TOKEN") {
		t.Fatalf("status must list env names, never values: %s", b)
	}
}

func TestHTTPServerHeadersAndReconnect(t *testing.T) {
	srv := mcpserver.New(mcpserver.Options{})
	var handler atomic.Pointer[http.Handler]
	h := mcpserver.Handler(srv)
	handler.Store(&h)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer http-secret-value" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		(*handler.Load()).ServeHTTP(w, r)
	}))
	defer ts.Close()
	m := NewManager(loopback(), nil)
	defer m.Close()
	spec := Spec{ID: "web", Transport: TransportHTTP, URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer http-secret-value"}}
	install(t, m, spec)
	if res := call(t, m, "mcp__web__echo", `{"text":"over http"}`); res.Content != "over http" {
		t.Fatalf("echo: %+v", res)
	}

	// Without the header the server refuses: unreachable, naming the
	// server, never echoing the secret.
	bad := spec
	bad.ID, bad.Headers = "web2", map[string]string{"Authorization": "Bearer wrong-secret-value"}
	_, err := m.Dial(context.Background(), bad)
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.ServerID != "web2" || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Fatalf("dial without auth: %v", err)
	}

	// The server forgets every session (a restart): the next call is a
	// transport error, then the manager reconnects with a new session and
	// calls work again.
	fresh := mcpserver.Handler(mcpserver.New(mcpserver.Options{}))
	handler.Store(&fresh)
	_, err = m.Call(context.Background(), "mcp__web__echo", json.RawMessage(`{"text":"x"}`))
	var te *TransportError
	if err != nil && !errors.As(err, &te) {
		t.Fatalf("call after restart: want a transport error or success, got %v", err)
	}
	waitFor(t, "reconnected", func() bool {
		res, err := m.Call(context.Background(), "mcp__web__echo", json.RawMessage(`{"text":"again"}`))
		return err == nil && res.Content == "again"
	})
}

func TestUnreachableServers(t *testing.T) {
	old := ConnectTimeout
	ConnectTimeout = 2 * time.Second
	defer func() { ConnectTimeout = old }()
	m := NewManager(loopback(), nil)
	defer m.Close()

	ln := httptest.NewServer(http.NotFoundHandler())
	url := ln.URL
	ln.Close()
	cases := map[string]Spec{
		"closed port":   {ID: "gone", Transport: TransportHTTP, URL: url},
		"not mcp":       {ID: "plain", Transport: TransportHTTP, URL: notMCP(t)},
		"hangs on init": {ID: "hang", Transport: TransportStdio, Command: "/bin/sh", Args: []string{"-c", "sleep 30"}},
		"malformed":     {ID: "broken", Transport: TransportHTTP, URL: malformedServer(t)},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := m.Dial(context.Background(), spec)
			var ue *UnreachableError
			if !errors.As(err, &ue) || ue.ServerID != spec.ID {
				t.Fatalf("want an UnreachableError naming %s, got %v", spec.ID, err)
			}
			if spec.ID == "broken" && !strings.Contains(err.Error(), "malformed tool list: tool broken") {
				t.Fatalf("the refusal says what is wrong: %v", err)
			}
		})
	}
	if len(m.Status()) != 0 {
		t.Fatalf("a failed dial must install nothing: %+v", m.Status())
	}
}

// malformedServer serves mcpserver.NewMalformed over streamable HTTP.
func malformedServer(t *testing.T) string {
	ts := httptest.NewServer(mcpserver.Handler(mcpserver.NewMalformed()))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return ts.URL
}

func notMCP(t *testing.T) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	servers := filepath.Join(dir, "mcp-servers")
	if err := os.MkdirAll(servers, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(servers, "tool")
	outside := filepath.Join(dir, "outside")
	for _, f := range []string{exe, outside} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(servers, "escape")); err != nil {
		t.Fatal(err)
	}
	p := Policy{ServersDir: servers, SSRF: netguard.Policy{Enabled: true}}
	got, err := p.CheckRegistration(Spec{ID: "a", Transport: TransportStdio, Command: "tool"})
	if err != nil || !strings.HasSuffix(got.Command, "/mcp-servers/tool") {
		t.Fatalf("inside: %v %q", err, got.Command)
	}
	for _, cmd := range []string{"escape", outside, "../outside", "missing"} {
		if _, err := p.CheckRegistration(Spec{ID: "a", Transport: TransportStdio, Command: cmd}); err == nil {
			t.Fatalf("command %q must be refused", cmd)
		}
	}
	if _, err := p.CheckRegistration(Spec{ID: "a", Transport: TransportHTTP, URL: "http://127.0.0.1:9/mcp"}); err == nil {
		t.Fatal("SSRF policy must refuse loopback")
	}
	team := Policy{Edition: EditionTeam, ServersDir: servers}
	if _, err := team.CheckRegistration(Spec{ID: "a", Transport: TransportStdio, Command: "tool"}); err == nil || !strings.Contains(err.Error(), "team edition") {
		t.Fatalf("team must refuse stdio: %v", err)
	}
	if _, err := team.CheckRegistration(Spec{ID: "a", Transport: TransportHTTP, URL: "http://example.com/mcp"}); err == nil {
		t.Fatal("team must refuse http://")
	}
	if _, err := team.CheckRegistration(Spec{ID: "a", Transport: TransportHTTP, URL: "https://example.com/mcp"}); err != nil {
		t.Fatalf("team allows https: %v", err)
	}
}

func TestNamesAndGrants(t *testing.T) {
	if s, tl, ok := SplitToolName("mcp__dev__read__file"); !ok || s != "dev" || tl != "read__file" {
		t.Fatalf("split: %q %q %v", s, tl, ok)
	}
	if Granted([]string{"read_file", Grant("dev")}, "mcp__devx__a") || !Granted([]string{Grant("dev")}, "mcp__dev__a") {
		t.Fatal("grant per server")
	}
	if !Granted([]string{Grant("*")}, "mcp__x__y") || Granted([]string{Grant("*")}, "read_file") {
		t.Fatal("grant for all servers covers MCP tools only")
	}
	if ValidID("a__b") || !ValidID("files-1") {
		t.Fatal("ids")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerErrorTextsAreScrubbed: a server's own env value, echoed back
// in a tool error, reaches the model masked by the one scrubber.
func TestServerErrorTextsAreScrubbed(t *testing.T) {
	m := NewManager(loopback(), nil)
	defer m.Close()
	install(t, m, stdioSpec("echoes"))
	res := call(t, m, "mcp__echoes__fail", `{"message": "leaked stdio-secret-value here"}`)
	if !res.IsError || strings.Contains(res.Content, "stdio-secret-value") || !strings.Contains(res.Content, "leaked") {
		t.Fatalf("tool error not scrubbed: %+v", res)
	}
	m.Remove("echoes")
	if got := scrub.String("x stdio-secret-value"); got != "x stdio-secret-value" {
		t.Fatalf("a removed server's values stay scrubbed: %q", got)
	}
}
