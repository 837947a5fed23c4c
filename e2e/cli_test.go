package e2e

// End-to-end tests of the agentry command-line client: the real binaries
// (built once per test binary) against real gateways on loopback.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// ---------------------------------------------------------------- harness

// cliVersion is the version the test client is built with (update tests
// install a newer one).
const cliVersion = gatewaytest.ClientVersion

// moduleRoot is the repository root (the folder of go.mod).
func moduleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// binaries is the folder of the agentry and agentryd binaries, built once
// per test process by the harness.
func binaries(t testing.TB) string {
	t.Helper()
	return filepath.Dir(gatewaytest.Binary(t, "agentryd"))
}

// cliHome is one user's machine: a home folder (workspace ~/.agentry,
// legacy ~/agentry), a working folder and the environment of the client.
type cliHome struct {
	t    *testing.T
	bin  string
	Home string
	WS   string
	Dir  string
	Env  map[string]string
}

func newHome(t *testing.T) *cliHome {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "work")
	os.MkdirAll(dir, 0o755)
	return &cliHome{t: t, bin: filepath.Join(binaries(t), "agentry"), Home: home, WS: filepath.Join(home, ".agentry"), Dir: dir, Env: map[string]string{}}
}

// writeConfig writes the workspace's config.yaml.
func (h *cliHome) writeConfig(text string) {
	h.t.Helper()
	os.MkdirAll(h.WS, 0o755)
	if err := os.WriteFile(filepath.Join(h.WS, "config.yaml"), []byte(text), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

type result struct {
	Stdout, Stderr string
	Code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.Code, r.Stdout, r.Stderr)
}

// JSON decodes stdout as one JSON value.
func (r result) JSON(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, r)
	}
	return v
}

func (h *cliHome) environ(extra map[string]string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AGENTRY_") || k == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+h.Home)
	for _, m := range []map[string]string{h.Env, extra} {
		for k, v := range m {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// run runs the client with args (stdin empty).
func (h *cliHome) run(args ...string) result { return h.runWith(nil, "", args...) }

// runWith runs the client with extra environment and standard input.
func (h *cliHome) runWith(extra map[string]string, stdin string, args ...string) result {
	h.t.Helper()
	return h.exec(h.bin, extra, stdin, args...)
}

func (h *cliHome) exec(bin string, extra map[string]string, stdin string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = h.Dir
	cmd.Env = h.environ(extra)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			h.t.Fatalf("run %s %v: %v", bin, args, err)
		}
		code = ee.ExitCode()
	}
	return result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

func expectCode(t *testing.T, r result, code int, what string) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: want exit %d\n%s", what, code, r)
	}
}

func expectContains(t *testing.T, s, sub, what string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s: want %q in:\n%s", what, sub, s)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func portOf(t *testing.T, g *gatewaytest.Gateway) string {
	t.Helper()
	_, port, err := net.SplitHostPort(g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// snapshot records every entry below root: type, mode, size and content hash.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := d.Info()
		rel, _ := filepath.Rel(root, path)
		desc := fmt.Sprintf("%v", info.Mode())
		if !d.IsDir() {
			data, _ := os.ReadFile(path)
			sum := sha256.Sum256(data)
			desc += fmt.Sprintf(" %d %x", len(data), sum[:8])
		}
		out[rel] = desc
		return nil
	})
	return out
}

func sameTree(t *testing.T, before, after map[string]string, what string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s changed: %q -> %q", what, k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared", what, k)
		}
	}
}

const echoAgent = "id: %s\ndescription: Echoes the message\nllm: {provider: ollama}\n"

// ---------------------------------------------------------------- tests

// TestCLITargetPrecedence: flags > environment > selected context > local
// configuration, for the URL and the key; contexts are added, listed and
// switched with the client; an unknown context is a usage error.
func TestCLITargetPrecedence(t *testing.T) {
	gwA := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"alpha.yaml": fmt.Sprintf(echoAgent, "alpha")}})
	gwB := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"beta.yaml": fmt.Sprintf(echoAgent, "beta")}})
	key := gatewaytest.TestAPIKey
	h := newHome(t)
	h.writeConfig(fmt.Sprintf("server: {port: %s, api_key: %s}\ncli:\n  contexts:\n    b: {gateway_url: %q, api_key: %q}\n", portOf(t, gwA), key, gwB.URL(), key))

	agents := func(r result) string {
		t.Helper()
		expectCode(t, r, 0, "agent list")
		switch {
		case strings.Contains(r.Stdout, "alpha") && !strings.Contains(r.Stdout, "beta"):
			return "A"
		case strings.Contains(r.Stdout, "beta") && !strings.Contains(r.Stdout, "alpha"):
			return "B"
		}
		t.Fatalf("cannot tell the gateway:\n%s", r)
		return ""
	}
	// Local configuration: server.port and server.api_key.
	if g := agents(h.run("agent", "list")); g != "A" {
		t.Fatalf("local config reached %s", g)
	}
	cur := h.run("context", "current", "--json").JSON(t)
	if cur["gateway_url_from"] != "server.host/server.port" || cur["api_key_from"] != "server.api_key" || cur["local"] != true {
		t.Fatalf("context current = %v", cur)
	}
	// The selected context beats the local configuration.
	expectCode(t, h.run("context", "use", "b"), 0, "context use b")
	if g := agents(h.run("agent", "list")); g != "B" {
		t.Fatalf("active context reached %s", g)
	}
	r := h.run("context", "list")
	expectCode(t, r, 0, "context list")
	expectContains(t, r.Stdout, "*", "active marker")
	if strings.Contains(r.Stdout, key) {
		t.Fatalf("context list shows a key:\n%s", r)
	}
	// AGENTRY_CONTEXT beats cli.active_context.
	expectCode(t, h.run("context", "add", "a", "--gateway", gwA.URL(), "--api-key", key), 0, "context add")
	if g := agents(h.runWith(map[string]string{"AGENTRY_CONTEXT": "a"}, "", "agent", "list")); g != "A" {
		t.Fatalf("AGENTRY_CONTEXT reached %s", g)
	}
	// AGENTRY_GATEWAY beats the context; --gateway beats AGENTRY_GATEWAY.
	env := map[string]string{"AGENTRY_CONTEXT": "a", "AGENTRY_GATEWAY": gwB.URL()}
	if g := agents(h.runWith(env, "", "agent", "list")); g != "B" {
		t.Fatalf("AGENTRY_GATEWAY reached %s", g)
	}
	if g := agents(h.runWith(env, "", "--gateway", gwA.URL(), "agent", "list")); g != "A" {
		t.Fatalf("--gateway reached %s", g)
	}
	// --context beats AGENTRY_CONTEXT.
	if g := agents(h.runWith(map[string]string{"AGENTRY_CONTEXT": "a"}, "", "--context", "b", "agent", "list")); g != "B" {
		t.Fatalf("--context reached %s", g)
	}
	// Keys: AGENTRY_API_KEY beats the context's; --api-key beats both.
	r = h.runWith(map[string]string{"AGENTRY_API_KEY": "wrong-key"}, "", "agent", "list")
	expectCode(t, r, 1, "wrong env key")
	expectContains(t, r.Stderr, "missing or invalid credentials", "gateway's error text")
	expectContains(t, r.Stderr, "HTTP 401", "status in error")
	agents(h.runWith(map[string]string{"AGENTRY_API_KEY": "wrong-key"}, "", "--api-key", key, "agent", "list"))
	// Unknown context: usage error listing the known ones.
	r = h.run("--context", "staging", "agent", "list")
	expectCode(t, r, 2, "unknown context")
	expectContains(t, r.Stderr, `context "staging"`, "names the context")
	expectContains(t, r.Stderr, "a, b", "lists the known ones")
	r = h.run("context", "use", "nope")
	expectCode(t, r, 2, "context use unknown")
	expectContains(t, r.Stderr, "a, b", "lists the known ones")

	// The workspace's generated key (credentials/api_key) is used for a
	// local gateway when server.api_key is not set.
	h2 := newHome(t)
	h2.writeConfig(fmt.Sprintf("server: {port: %s}\n", portOf(t, gwA)))
	r = h2.run("agent", "list")
	expectCode(t, r, 1, "no key at all")
	expectContains(t, r.Stderr, "HTTP 401", "unauthenticated")
	os.MkdirAll(filepath.Join(h2.WS, "credentials"), 0o700)
	os.WriteFile(filepath.Join(h2.WS, "credentials", "api_key"), []byte(key+"\n"), 0o600)
	if g := agents(h2.run("agent", "list")); g != "A" {
		t.Fatalf("key file reached %s", g)
	}
	// ... but never sent to a remote target: the refusal happens before any
	// request, and a remote context without a key sends none.
	cur = h2.run("--gateway", "https://gateway.example.com", "context", "current", "--json").JSON(t)
	if _, sent := cur["api_key_from"]; sent || cur["local"] != false {
		t.Fatalf("remote target got the local key: %v", cur)
	}
}

// TestCLIRemoteRefusal: host-changing commands are refused for a remote
// target before any file is written; locally they work.
func TestCLIRemoteRefusal(t *testing.T) {
	h := newHome(t)
	h.writeConfig(fmt.Sprintf("server: {port: %d}\ncli:\n  contexts:\n    far: {gateway_url: \"http://192.0.2.10:18789\"}\n", freePort(t)))
	legacy := filepath.Join(h.Home, "agentry")
	os.MkdirAll(legacy, 0o755)
	os.WriteFile(filepath.Join(legacy, "helper.yaml"), []byte(fmt.Sprintf(echoAgent, "helper")), 0o644)
	os.WriteFile(filepath.Join(legacy, "agentry.db"), []byte("not really a database"), 0o644)

	before := snapshot(t, h.Home)
	remote := "http://192.0.2.10:18789" // TEST-NET-1: never reachable, and never contacted
	cases := [][]string{
		{"--gateway", remote, "setup", "--yes"},
		{"--gateway", remote, "workspace", "migrate", "-y"},
		{"--gateway", remote, "seed-examples"},
		{"--gateway", remote, "server", "start"},
		{"--context", "far", "setup", "--yes", "--force"},
	}
	for _, args := range cases {
		r := h.run(args...)
		expectCode(t, r, 1, strings.Join(args, " "))
		expectContains(t, r.Stderr, "192.0.2.10:18789", "names the target")
		expectContains(t, r.Stderr, "no local files changed", "says nothing changed")
	}
	r := h.runWith(map[string]string{"AGENTRY_GATEWAY": remote}, "", "seed-examples")
	expectCode(t, r, 1, "env remote seed-examples")
	expectContains(t, r.Stderr, "AGENTRY_GATEWAY", "names where the target came from")
	// --dry-run is allowed: it only reads.
	r = h.run("--gateway", remote, "workspace", "migrate", "--dry-run")
	expectCode(t, r, 0, "remote dry run")
	expectContains(t, r.Stdout, "helper.yaml", "plan lists the agent file")
	expectContains(t, r.Stdout, "nothing was moved", "dry run")
	sameTree(t, before, snapshot(t, h.Home), "after refused commands")

	// Locally the same commands work.
	r = h.run("workspace", "migrate", "--dry-run", "--json")
	expectCode(t, r, 0, "local dry run json")
	if plan := r.JSON(t); plan["dry_run"] != true || len(plan["moves"].([]any)) != 2 {
		t.Fatalf("plan = %v", plan)
	}
	r = h.run("workspace", "migrate")
	expectCode(t, r, 2, "migrate without -y and without a terminal")
	r = h.run("workspace", "migrate", "-y")
	expectCode(t, r, 0, "local migrate")
	for _, p := range []string{filepath.Join(h.WS, "agents", "helper.yaml"), filepath.Join(h.WS, "data", "agentry.db")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after migrate: %v", err)
		}
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("legacy folder should be gone when emptied: %v", err)
	}
	r = h.run("workspace", "migrate", "-y")
	expectCode(t, r, 0, "second migrate")
	expectContains(t, r.Stdout, "Nothing to migrate", "idempotent")

	r = h.run("seed-examples")
	expectCode(t, r, 0, "seed-examples")
	if _, err := os.Stat(filepath.Join(h.WS, "agents", "hello.yaml")); err != nil {
		t.Fatal(err)
	}
	r = h.run("agent", "validate", filepath.Join(h.WS, "agents"))
	expectCode(t, r, 0, "seeded examples validate")

	// setup: refuses to overwrite without --force; writes a valid config.
	r = h.run("setup", "--yes")
	expectCode(t, r, 1, "setup over an existing config")
	expectContains(t, r.Stderr, "--force", "hint")
	r = h.run("setup", "--yes", "--force", "--port", "19555", "--provider", "openai", "--json")
	expectCode(t, r, 0, "setup --force")
	data, _ := os.ReadFile(filepath.Join(h.WS, "config.yaml"))
	for _, want := range []string{"port: 19555", "default_provider: openai", "api_key_env: OPENAI_API_KEY", "far:"} {
		expectContains(t, string(data), want, "config after setup")
	}
	cur := h.run("context", "current", "--json").JSON(t)
	if cur["gateway_url"] != "http://127.0.0.1:19555" {
		t.Fatalf("after setup the local target is %v", cur["gateway_url"])
	}
	fresh := newHome(t)
	r = fresh.run("setup", "--yes", "--port", "19556")
	expectCode(t, r, 0, "setup on a fresh machine")
	if st, err := os.Stat(filepath.Join(fresh.WS, "config.yaml")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config.yaml: %v %v", st, err)
	}
	r = fresh.run("doctor")
	expectContains(t, r.Stdout, "config.yaml is valid", "doctor reads the written config")
}

// TestCLICommands runs every command against a real gateway, in human and
// JSON form.
func TestCLICommands(t *testing.T) {
	extDir := t.TempDir() // an agent_dirs folder the operator manages by hand
	os.WriteFile(filepath.Join(extDir, "ext.yaml"), []byte(fmt.Sprintf(echoAgent, "ext")), 0o644)
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{
			"alpha.yaml": fmt.Sprintf(echoAgent, "alpha"),
			"cron.yaml":  "id: nightly\ndescription: Nightly report\ntrigger: cron\nschedule: {cron: \"0 3 * * *\", prompt: \"write the nightly report\"}\n",
		},
		Config: fmt.Sprintf("agent_dirs: [%q]\nauth:\n  keys: [{subject: watcher, key: viewer-key-0123456789, role: viewer}]\n", extDir),
	})
	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	both := func(args ...string) (result, result) {
		t.Helper()
		human := h.run(args...)
		js := h.run(append([]string{"--json"}, args...)...)
		if js.Code == 0 && !json.Valid([]byte(js.Stdout)) {
			t.Fatalf("%v --json: stdout is not JSON\n%s", args, js)
		}
		return human, js
	}
	ok := func(args ...string) (result, result) {
		t.Helper()
		hr, jr := both(args...)
		expectCode(t, hr, 0, strings.Join(args, " "))
		expectCode(t, jr, 0, strings.Join(args, " ")+" --json")
		return hr, jr
	}

	hr, jr := ok("agent", "list")
	expectContains(t, hr.Stdout, "ID", "table header")
	expectContains(t, hr.Stdout, "alpha", "table row")
	if n := len(jr.JSON(t)["agents"].([]any)); n != 3 {
		t.Fatalf("agents = %d", n)
	}
	hr, jr = ok("agent", "get", "alpha")
	expectContains(t, hr.Stdout, "Echoes the message", "get")
	if jr.JSON(t)["id"] != "alpha" {
		t.Fatal(jr)
	}
	r := h.run("agent", "get", "ghost")
	expectCode(t, r, 1, "get unknown")
	expectContains(t, r.Stderr, `agent "ghost" not found`, "gateway's error text")

	// validate: local, file/line/key, nonzero on errors.
	good := filepath.Join(h.Dir, "helper.yaml")
	bad := filepath.Join(h.Dir, "bad.yaml")
	os.WriteFile(good, []byte("# a helper\nid: helper\ndescription: helps\nllm: {provider: ollama}\n"), 0o644)
	os.WriteFile(bad, []byte("id: broken\ndescription: x\nmax_turns: lots\ntrigger: sometimes\n"), 0o644)
	hr, jr = ok("agent", "validate", good)
	expectContains(t, hr.Stdout, "ok (agent helper)", "validate ok")
	r = h.run("agent", "validate", bad)
	expectCode(t, r, 1, "validate bad")
	expectContains(t, r.Stderr, "bad.yaml:3: max_turns:", "file, line and key")
	r = h.run("--json", "agent", "validate", bad, good)
	expectCode(t, r, 1, "validate bad --json")
	if v := r.JSON(t); v["valid"] != false {
		t.Fatalf("validate json = %v", v)
	}
	// create: validated locally first (nothing sent), then written.
	r = h.run("agent", "create", "--file", bad)
	expectCode(t, r, 1, "create invalid")
	expectContains(t, r.Stderr, "nothing was sent", "local validation")
	hr = h.run("agent", "create", "--file", good)
	expectCode(t, hr, 0, "create")
	data, err := os.ReadFile(filepath.Join(g.Workspace, "agents", "helper.yaml"))
	if err != nil || !strings.Contains(string(data), "# a helper") {
		t.Fatalf("gateway file: %q %v", data, err)
	}
	r = h.run("--json", "agent", "create", "--file", good)
	expectCode(t, r, 1, "create duplicate")
	expectContains(t, r.Stderr, "HTTP 409", "conflict")
	hr, jr = ok("agent", "disable", "helper")
	expectContains(t, hr.Stdout, "disabled", "disable")
	if jr.JSON(t)["enabled"] != false {
		t.Fatal(jr)
	}
	data, _ = os.ReadFile(filepath.Join(g.Workspace, "agents", "helper.yaml"))
	expectContains(t, string(data), "enabled: false", "file rewritten")
	expectContains(t, string(data), "# a helper", "comment kept")
	r = h.run("chat", "--agent", "helper", "hi")
	expectCode(t, r, 1, "chat with a disabled agent")
	expectContains(t, r.Stderr, "disabled", "gateway's error")
	hr, jr = ok("agent", "enable", "helper")
	if jr.JSON(t)["enabled"] != true {
		t.Fatal(jr)
	}
	hr, jr = ok("agent", "trigger", "alpha", "ping", "me")
	expectContains(t, hr.Stdout, "echo: ping me", "trigger reply")
	if v := jr.JSON(t); v["run_id"] == "" || v["usage"] == nil {
		t.Fatalf("trigger json = %v", v)
	}
	hr = h.run("agent", "trigger", "nightly")
	expectCode(t, hr, 0, "trigger with the schedule prompt")
	expectContains(t, hr.Stdout, "echo: write the nightly report", "schedule.prompt used")
	hr = h.run("agent", "delete", "helper")
	expectCode(t, hr, 0, "delete")
	if _, err := os.Stat(filepath.Join(g.Workspace, "agents", "helper.yaml")); !os.IsNotExist(err) {
		t.Fatalf("file not deleted: %v", err)
	}
	h.run("agent", "create", "--file", good)
	r = h.run("--json", "agent", "delete", "helper")
	expectCode(t, r, 0, "delete --json")
	if r.JSON(t)["deleted"] != true {
		t.Fatal(r)
	}

	// Agents from agent_dirs are not the gateway's to delete.
	r = h.run("agent", "delete", "ext")
	expectCode(t, r, 1, "delete outside the workspace")
	expectContains(t, r.Stderr, "outside the workspace agents folder", "reason")
	expectContains(t, r.Stderr, "HTTP 409", "conflict")
	// The API also takes a definition as a JSON object, and names file,
	// line and key of a bad one (only the client's base name).
	resp := g.Do("POST", "/api/v1/agents", map[string]any{"id": "jsonagent", "description": "from JSON", "system_prompt": "a\nb"})
	if resp.Status != 201 || resp.JSON["id"] != "jsonagent" {
		t.Fatalf("create from JSON: %d %s", resp.Status, resp.Raw)
	}
	resp = g.Do("POST", "/api/v1/agents", map[string]any{"definition": "id: ok\nmax_turns: many\n", "file": "/home/me/agents/x.yaml"})
	probs, _ := resp.JSON["problems"].([]any)
	if resp.Status != 400 || len(probs) != 1 || probs[0].(map[string]any)["key"] != "max_turns" || probs[0].(map[string]any)["file"] != "x.yaml" || probs[0].(map[string]any)["line"] != 2.0 {
		t.Fatalf("invalid definition: %d %s", resp.Status, resp.Raw)
	}
	// Roles: a viewer may read agents but not secrets, the sessions listing or logs.
	viewer := map[string]string{"AGENTRY_API_KEY": "viewer-key-0123456789"}
	expectCode(t, h.runWith(viewer, "", "agent", "list"), 0, "viewer agent list")
	for _, c := range [][]string{{"secret", "list"}, {"memory", "sessions", "--agent", "alpha"}, {"logs"}, {"agent", "disable", "alpha"}} {
		r := h.runWith(viewer, "", c...)
		expectCode(t, r, 1, "viewer "+strings.Join(c, " "))
		expectContains(t, r.Stderr, "HTTP 403", "forbidden")
	}

	// chat: streamed text, then JSON lines.
	hr = h.run("chat", "--agent", "alpha", "hello", "there")
	expectCode(t, hr, 0, "chat")
	if strings.TrimSpace(hr.Stdout) != "echo: hello there" {
		t.Fatalf("chat stdout = %q", hr.Stdout)
	}
	jr = h.run("--json", "chat", "--agent", "alpha", "--user", "u2", "hello")
	expectCode(t, jr, 0, "chat --json")
	lines := strings.Split(strings.TrimSpace(jr.Stdout), "\n")
	var text strings.Builder
	var last map[string]any
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("chat --json line %q: %v", l, err)
		}
		if ev["type"] == "delta" {
			text.WriteString(ev["text"].(string))
		}
		last = ev
	}
	if text.String() != "echo: hello" || last["type"] != "done" || !strings.HasPrefix(last["session_id"].(string), "http-") {
		t.Fatalf("chat --json = %q, last %v", text.String(), last)
	}
	r = h.runWith(nil, "from standard input\n", "chat", "--agent", "alpha")
	expectCode(t, r, 0, "chat from stdin")
	expectContains(t, r.Stdout, "echo: from standard input", "stdin message")
	r = h.run("chat", "--agent", "ghost", "hi")
	expectCode(t, r, 1, "chat unknown agent")
	expectContains(t, r.Stderr, "agent not found", "gateway's error text")
	r = h.run("chat", "hi")
	expectCode(t, r, 2, "chat without --agent")

	// memory: the conversations above.
	hr, jr = ok("memory", "sessions", "--agent", "alpha")
	expectContains(t, hr.Stdout, "SESSION", "memory table")
	expectContains(t, hr.Stdout, "u2", "memory user")
	if v := jr.JSON(t); v["count"].(float64) < 2 {
		t.Fatalf("memory = %v", v)
	}

	// secrets: write-only, never in any output, log or the database file.
	const secretValue = "sk-e2e-DO-NOT-LEAK-8f7e6d"
	r = h.runWith(nil, secretValue+"\n", "secret", "set", "OPENAI_KEY")
	expectCode(t, r, 0, "secret set from stdin")
	secretFile := filepath.Join(h.Dir, "token.txt")
	os.WriteFile(secretFile, []byte(secretValue+"-2\n"), 0o600)
	r = h.run("--json", "secret", "set", "SLACK_TOKEN", "--file", secretFile)
	expectCode(t, r, 0, "secret set --file")
	hr, jr = ok("secret", "list")
	expectContains(t, hr.Stdout, "OPENAI_KEY", "secret list")
	expectContains(t, jr.Stdout, "SLACK_TOKEN", "secret list json")
	r = h.runWith(nil, "x", "secret", "set", "bad name")
	expectCode(t, r, 1, "bad secret name")
	expectContains(t, r.Stderr, "HTTP 400", "invalid name")
	hr, jr = ok("logs", "--lines", "500")
	expectContains(t, hr.Stdout, "http request", "log lines")
	if len(jr.JSON(t)["lines"].([]any)) == 0 {
		t.Fatal(jr)
	}
	for _, out := range []string{hr.Stdout, jr.Stdout, h.run("--json", "secret", "list").Stdout, h.run("--json", "memory", "sessions", "--agent", "alpha").Stdout} {
		if strings.Contains(out, secretValue) {
			t.Fatalf("secret value leaked:\n%s", out)
		}
	}
	for _, name := range []string{"agentry.db", "agentry.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(g.Workspace, "data", name)); err == nil && bytes.Contains(b, []byte(secretValue)) {
			t.Fatalf("secret value stored in clear in %s", name)
		}
	}
	if st, err := os.Stat(filepath.Join(g.Workspace, "credentials", "secrets.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.key: %v %v", st, err)
	}
	hr = h.run("secret", "delete", "SLACK_TOKEN")
	expectCode(t, hr, 0, "secret delete")
	r = h.run("--json", "secret", "delete", "SLACK_TOKEN")
	expectCode(t, r, 1, "secret delete again")
	expectContains(t, r.Stderr, "HTTP 404", "not found")

	// logs --follow: prints new lines as they are logged, until interrupted.
	follow := exec.Command(h.bin, "logs", "--follow", "--lines", "0")
	follow.Dir, follow.Env = h.Dir, h.environ(nil)
	pipe, _ := follow.StdoutPipe()
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "/api/v1/agents/follow-marker") {
				seen <- sc.Text()
				return
			}
		}
	}()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	func() {
		defer tick.Stop()
		for {
			g.Do("GET", "/api/v1/agents/follow-marker", nil) // logged by the gateway
			select {
			case <-seen:
				return
			case <-tick.C:
			case <-deadline:
				t.Fatal("logs --follow did not print a new line")
			}
		}
	}()
	follow.Process.Signal(os.Interrupt)
	if err := follow.Wait(); err != nil {
		t.Fatalf("logs --follow after Ctrl-C: %v", err)
	}

	// workspace info, server status, version.
	hr, jr = ok("workspace", "info")
	expectContains(t, hr.Stdout, "workspace:", "workspace info")
	if jr.JSON(t)["root"] != h.WS {
		t.Fatal(jr)
	}
	hr, jr = ok("server", "status")
	expectContains(t, hr.Stdout, "temporal", "status checks")
	if jr.JSON(t)["status"] != "ok" {
		t.Fatal(jr)
	}
	hr, jr = ok("version")
	expectContains(t, hr.Stdout, "agentry "+cliVersion, "client version")
	expectContains(t, hr.Stdout, "gateway test", "gateway version")
	if v := jr.JSON(t); v["client"] != cliVersion || v["gateway"] != "test" {
		t.Fatal(jr)
	}
	hr, jr = ok("context", "current")
	expectContains(t, hr.Stdout, "AGENTRY_GATEWAY", "where the URL came from")
	hr, jr = ok("context", "list")

	// Channels and schedules are served by their own feature; the client
	// prints what the gateway answers, or its error text.
	for _, c := range [][]string{{"channel", "list"}, {"channel", "status", "webhook"}, {"schedule", "list"},
		{"channel", "update", "webhook", "--set", "method=POST"}, {"channel", "webhook", "configure", "--method", "post"},
		{"channel", "disable", "webhook"}, {"channel", "webhook", "enable"}} {
		hr, jr := both(c...)
		if hr.Code == 0 {
			expectCode(t, jr, 0, strings.Join(c, " ")+" --json")
			continue
		}
		expectCode(t, hr, 1, strings.Join(c, " "))
		expectContains(t, hr.Stderr, "(HTTP ", "gateway error passed through")
	}
	r = h.run("channel", "update", "webhook", "--set", "novalue")
	expectCode(t, r, 2, "--set without =")
	expectContains(t, r.Stderr, `"novalue"`, "names the argument")
	r = h.run("channel", "webhook", "configure", "--header", "no colon")
	expectCode(t, r, 2, "bad header")

	// Usage errors.
	for _, args := range [][]string{{"frobnicate"}, {"agent", "frobnicate"}, {"agent", "list", "--bogus"}, {"agent", "get"}, {"eval", "--agent", "alpha"}} {
		r := h.run(args...)
		expectCode(t, r, 2, strings.Join(args, " "))
	}
	r = h.run("frobnicate")
	expectContains(t, r.Stderr, "Available Commands", "usage printed")
}

// TestCLIChatStreams: chunks reach the terminal as the provider produces
// them, not when the reply is complete.
func TestCLIChatStreams(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"alpha.yaml": fmt.Sprintf(echoAgent, "alpha")}})
	g.Fake.Script(fakellm.Rule{Contains: "count", Reply: "one two three four five six", Chunks: 6, ChunkDelay: fakellm.Duration(300 * time.Millisecond)})
	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey

	cmd := exec.Command(h.bin, "chat", "--agent", "alpha", "please count")
	cmd.Dir, cmd.Env = h.Dir, h.environ(nil)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	buf := make([]byte, 256)
	reads := 0
	firstBeforeLast := false
	for {
		n, err := out.Read(buf)
		if n > 0 {
			reads++
			got.Write(buf[:n])
			if !strings.Contains(got.String(), "six") && strings.Contains(got.String(), "one") {
				firstBeforeLast = true
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("chat: %v", err)
	}
	if strings.TrimSpace(got.String()) != "one two three four five six" || !firstBeforeLast || reads < 2 {
		t.Fatalf("streamed %q in %d reads (partial seen: %v)", got.String(), reads, firstBeforeLast)
	}
}

// TestCLIChatStreamsInTmux records `agentry chat` in a real terminal
// (tmux send-keys / capture-pane): frames show the reply growing.

// startTmux starts a shell in a detached tmux session of 120 columns and
// rows lines, in h's directory with only PATH, HOME and TERM set, removed
// when the test ends; it returns once the shell shows its prompt (so the
// screen reads in order) and gives the tmux command on that server.
func startTmux(t *testing.T, tmux string, h *cliHome, session string, rows int) func(args ...string) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tm("new-session", "-d", "-s", session, "-x", "120", "-y", fmt.Sprint(rows), "-c", h.Dir, "env", "-i", "PATH="+os.Getenv("PATH"), "HOME="+h.Home, "TERM=xterm", "sh")
	t.Cleanup(func() { exec.Command(tmux, "-S", socket, "kill-server").Run() })
	for i := 0; i < 100 && strings.TrimSpace(tm("capture-pane", "-p", "-t", session)) == ""; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return tm
}

// Skipped when tmux is not installed (CI does not need it).
func TestCLIChatStreamsInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed")
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"alpha.yaml": fmt.Sprintf(echoAgent, "alpha")}})
	g.Fake.Script(fakellm.Rule{Contains: "count", Reply: "one two three four five six", Chunks: 6, ChunkDelay: fakellm.Duration(400 * time.Millisecond)})
	h := newHome(t)
	session := "agentry-chat"
	tm := startTmux(t, tmux, h, session, 20)
	// The marker is split in the command line so only the output matches it.
	cmdline := fmt.Sprintf(`AGENTRY_GATEWAY=%s AGENTRY_API_KEY=%s %s chat --agent alpha 'please count'; echo "EXIT""=$?"`, g.URL(), gatewaytest.TestAPIKey, h.bin)
	tm("send-keys", "-t", session, cmdline, "Enter")
	var frames, replies []string
	partial := false
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		pane := tm("capture-pane", "-p", "-t", session)
		if len(frames) == 0 || frames[len(frames)-1] != pane {
			frames = append(frames, pane)
		}
		reply := ""
		for _, l := range strings.Split(pane, "\n") {
			if i := strings.Index(l, "one"); i >= 0 && !strings.Contains(l, "AGENTRY") {
				reply = strings.TrimSpace(l[i:])
			}
		}
		if reply != "" && !strings.Contains(reply, "six") {
			partial = true
		}
		if reply != "" && (len(replies) == 0 || replies[len(replies)-1] != reply) {
			replies = append(replies, reply)
		}
		if strings.Contains(pane, "EXIT=") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// AGENTRY_CLI_RECORDING=path keeps every captured frame for a look.
	if rec := os.Getenv("AGENTRY_CLI_RECORDING"); rec != "" {
		os.WriteFile(rec, []byte(strings.Join(frames, "\n----- frame -----\n")), 0o644)
	}
	t.Logf("tmux: %d distinct frames; the reply line as captured:\n  %s\nlast frame:\n%s", len(frames), strings.Join(replies, "\n  "), frames[len(frames)-1])
	last := frames[len(frames)-1]
	if !strings.Contains(last, "one two three four five six") || !strings.Contains(last, "EXIT=0") {
		t.Fatalf("final frame:\n%s", last)
	}
	if !partial {
		t.Fatalf("no frame showed a partial reply; frames:\n%s", strings.Join(frames, "\n-----\n"))
	}
}

// TestCLIEval: passing and failing suites, tags, repeat, fail-fast, JSON,
// exit codes and the progress line.
func TestCLIEval(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"alpha.yaml": fmt.Sprintf(echoAgent, "alpha")}})
	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	dir := filepath.Join(h.Dir, "suites")
	os.MkdirAll(dir, 0o755)
	pass := filepath.Join(dir, "a-pass.json")
	os.WriteFile(pass, []byte(`{"name": "smoke", "cases": [
		{"name": "greets", "input": "hello world", "expected_contains": ["ECHO", "hello"], "tags": ["fast"]},
		{"name": "repeats", "input": "say banana", "expected_contains": ["banana"]},
		{"name": "later", "input": "x", "expected_contains": [], "skip": "not ready"}]}`), 0o644)
	fail := filepath.Join(h.Dir, "fail.json")
	os.WriteFile(fail, []byte(`{"name": "strict", "cases": [
		{"name": "wants-apple", "input": "say banana", "expected_contains": ["apple"], "tags": ["fruit"]},
		{"name": "ok", "input": "hi", "expected_contains": ["hi"]}]}`), 0o644)

	r := h.run("eval", "--agent", "alpha", "--suite", pass)
	expectCode(t, r, 0, "passing suite")
	expectContains(t, r.Stdout, "2 passed, 0 failed, 1 skipped", "summary")
	expectContains(t, r.Stdout, "latency: p50", "latency")
	expectContains(t, r.Stdout, "tokens:", "token summary")
	expectContains(t, r.Stderr, "eval [1/3] smoke/greets", "progress line")

	r = h.run("eval", "--agent", "alpha", "--suite", fail)
	expectCode(t, r, 1, "failing suite")
	expectContains(t, r.Stdout, `missing: "apple"`, "what is missing")
	expectContains(t, r.Stdout, "1 passed, 1 failed", "summary")

	r = h.run("--json", "eval", "--agent", "alpha", "--suite", fail, "--repeat", "2")
	expectCode(t, r, 1, "failing suite --json")
	rep := r.JSON(t)
	sum := rep["summary"].(map[string]any)
	if sum["runs"] != 4.0 || sum["failed"] != 2.0 || sum["passed"] != 2.0 || sum["input_tokens"] == nil {
		t.Fatalf("summary = %v", sum)
	}
	r = h.run("--json", "eval", "--agent", "alpha", "--suite", fail, "--fail-fast")
	expectCode(t, r, 1, "fail-fast")
	sum = r.JSON(t)["summary"].(map[string]any)
	if sum["failed"] != 1.0 || sum["skipped"] != 1.0 || sum["passed"] != 0.0 {
		t.Fatalf("fail-fast summary = %v", sum)
	}
	r = h.run("eval", "--agent", "alpha", "--suite", pass, "--tag", "fast")
	expectCode(t, r, 0, "tag filter")
	expectContains(t, r.Stdout, "1 passed, 0 failed, 2 skipped", "tag summary")
	r = h.run("eval", "--agent", "alpha", "--suite", fail, "--tag", "fast")
	expectCode(t, r, 1, "tag matching nothing")
	// A folder runs every suite in it.
	os.WriteFile(filepath.Join(dir, "b-second.json"), []byte(`{"name":"second","cases":[{"name":"c","input":"abc","expected_contains":["abc"]}]}`), 0o644)
	r = h.run("eval", "--agent", "alpha", "--suite", dir)
	expectCode(t, r, 0, "suite folder")
	expectContains(t, r.Stdout, "smoke, second: 3 passed", "both suites")
	// Bad input.
	r = h.run("eval", "--agent", "ghost", "--suite", pass)
	expectCode(t, r, 1, "unknown agent")
	expectContains(t, r.Stderr, "not found", "gateway error")
	os.WriteFile(filepath.Join(h.Dir, "broken.json"), []byte(`{"name":"x","cases":[{"name":"c","inptu":"typo"}]}`), 0o644)
	r = h.run("eval", "--agent", "alpha", "--suite", filepath.Join(h.Dir, "broken.json"))
	expectCode(t, r, 1, "broken suite")
	expectContains(t, r.Stderr, "inptu", "names the bad key")
	r = h.run("eval", "--agent", "alpha", "--suite", pass, "--repeat", "0")
	expectCode(t, r, 2, "repeat 0")
}

// TestCLIUpdate: check and install from a manifest served on loopback; the
// checksum is verified and the binary replaced atomically.
func TestCLIUpdate(t *testing.T) {
	h := newHome(t)
	binDir := t.TempDir()
	self := filepath.Join(binDir, "agentry")
	copyFile(t, h.bin, self)
	newBin := filepath.Join(t.TempDir(), "agentry-1.1.0")
	if err := gatewaytest.GoBuild(moduleRoot(t), newBin, "./cmd/agentry", "-X main.version=1.1.0"); err != nil {
		t.Fatal(err)
	}
	newData, _ := os.ReadFile(newBin)
	sum := sha256.Sum256(newData)
	platform := runtime.GOOS + "/" + runtime.GOARCH
	manifest := func(shaHex string) []byte {
		b, _ := json.Marshal(map[string]any{"version": "1.1.0", "platforms": map[string]any{platform: map[string]string{"url": "agentry-new", "sha256": shaHex}}})
		return b
	}
	// Filled before the server starts: handlers only read it.
	files := map[string][]byte{
		"agentry-new": newData,
		"good.json":   manifest(hex.EncodeToString(sum[:])),
		"bad.json":    manifest(strings.Repeat("ab", 32)),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	defer srv.Close()
	run := func(args ...string) result { return h.exec(self, nil, "", args...) }

	r := run("update", "check", "--manifest", srv.URL+"/good.json")
	expectCode(t, r, 0, "check")
	expectContains(t, r.Stdout, "Update available: 1.0.0 -> 1.1.0", "check")
	r = run("--json", "update", "check", "--manifest", srv.URL+"/good.json")
	if v := r.JSON(t); v["update_available"] != true || v["url"] != srv.URL+"/agentry-new" {
		t.Fatalf("check json = %v", v)
	}
	before := fileHash(t, self)
	r = run("update", "install", "--manifest", srv.URL+"/bad.json", "--yes")
	expectCode(t, r, 1, "checksum mismatch")
	expectContains(t, r.Stderr, "checksum mismatch", "refused")
	if fileHash(t, self) != before {
		t.Fatal("binary changed after a checksum mismatch")
	}
	entries, _ := os.ReadDir(binDir)
	if len(entries) != 1 {
		t.Fatalf("leftover files beside the binary: %v", entries)
	}
	r = run("update", "install", "--manifest", srv.URL+"/good.json", "--dry-run")
	expectCode(t, r, 0, "dry run")
	expectContains(t, r.Stdout, "Dry run", "dry run")
	if fileHash(t, self) != before {
		t.Fatal("binary changed by a dry run")
	}
	r = run("update", "install", "--manifest", srv.URL+"/good.json")
	expectCode(t, r, 2, "install without --yes and without a terminal")
	r = run("--json", "update", "install", "--manifest", srv.URL+"/good.json", "--yes")
	expectCode(t, r, 0, "install")
	if v := r.JSON(t); v["installed"] != true {
		t.Fatalf("install json = %v", v)
	}
	r = run("version")
	expectContains(t, r.Stdout, "agentry 1.1.0", "the new binary runs")
	if st, _ := os.Stat(self); st.Mode().Perm()&0o111 == 0 {
		t.Fatal("new binary is not executable")
	}
	// A local manifest file works too; now up to date.
	local := filepath.Join(t.TempDir(), "manifest.json")
	os.WriteFile(local, files["good.json"], 0o644)
	copyFile(t, newBin, filepath.Join(filepath.Dir(local), "agentry-new"))
	r = run("update", "install", "--manifest", local, "--yes")
	expectCode(t, r, 0, "up to date")
	expectContains(t, r.Stdout, "up to date", "no reinstall")
	r = run("update", "check")
	expectCode(t, r, 2, "no manifest configured")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func fileHash(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// TestCLIDoctor: a healthy setup passes (a warning does not fail it); a
// broken one fails with the reason.
func TestCLIDoctor(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"alpha.yaml": fmt.Sprintf(echoAgent, "alpha")}})
	manifest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"version": "1.0.0", "platforms": {}}`)
	}))
	defer manifest.Close()
	h := newHome(t)
	h.writeConfig(fmt.Sprintf("server: {port: %s, api_key: %s}\nupdates: {manifest_url: %q}\n", portOf(t, g), gatewaytest.TestAPIKey, manifest.URL))

	r := h.run("doctor")
	expectCode(t, r, 0, "healthy doctor")
	for _, want := range []string{"0 hard failure(s), 0 warning(s)", "authenticated as", "default provider", "up to date"} {
		expectContains(t, r.Stdout, want, "healthy doctor")
	}
	r = h.run("--json", "doctor")
	expectCode(t, r, 0, "healthy doctor --json")
	rep := r.JSON(t)
	if rep["ok"] != true {
		t.Fatalf("doctor json = %v", rep)
	}
	status := map[string]string{}
	for _, c := range rep["checks"].([]any) {
		m := c.(map[string]any)
		status[m["name"].(string)] = m["status"].(string)
	}
	for _, n := range []string{"config", "workspace", "gateway", "auth", "database", "temporal", "default provider", "update manifest"} {
		if status[n] != "ok" {
			t.Errorf("check %s = %q", n, status[n])
		}
	}

	// Warnings only: an unreachable manifest and a dead default provider.
	r = h.runWith(map[string]string{"AGENTRY_UPDATE_MANIFEST": "http://127.0.0.1:1/manifest.json"}, "", "doctor")
	expectCode(t, r, 0, "warnings only")
	expectContains(t, r.Stdout, "1 warning(s)", "manifest warning")
	gDead := gatewaytest.Start(t, gatewaytest.Options{Config: "llm:\n  providers:\n    ollama: {type: ollama, base_url: \"http://127.0.0.1:1\"}\n"})
	r = h.run("--gateway", gDead.URL(), "doctor")
	expectCode(t, r, 0, "dead provider is a warning")
	expectContains(t, r.Stdout, "not reachable", "provider detail")

	// Hard failures: wrong key, unreachable gateway, invalid config.
	r = h.run("--api-key", "wrong", "doctor")
	expectCode(t, r, 1, "wrong key")
	expectContains(t, r.Stdout, "refused", "auth detail")
	r = h.run("--json", "--gateway", fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), "doctor")
	expectCode(t, r, 1, "unreachable gateway")
	if rep := r.JSON(t); rep["ok"] != false || rep["hard_failures"].(float64) < 1 {
		t.Fatalf("broken doctor = %v", rep)
	}
	h.writeConfig("server: {port: not-a-port}\n")
	r = h.run("doctor")
	expectCode(t, r, 1, "invalid config")
	expectContains(t, r.Stdout, "config.yaml", "names the file")
}

// TestCLILocalDaemon runs the real agentryd with a generated API key: the
// client finds the gateway and its key from the local configuration alone,
// and workspace migrate refuses while the gateway runs.
func TestCLILocalDaemon(t *testing.T) {
	bin := binaries(t)
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	h := newHome(t)
	port := freePort(t)
	h.Env["AGENTRY_SERVER_PORT"] = fmt.Sprint(port)
	os.MkdirAll(filepath.Join(h.WS, "agents"), 0o755)
	os.WriteFile(filepath.Join(h.WS, "agents", "alpha.yaml"), []byte(fmt.Sprintf(echoAgent, "alpha")), 0o644)
	legacy := filepath.Join(h.Home, "agentry")
	os.MkdirAll(legacy, 0o755)
	os.WriteFile(filepath.Join(legacy, "old.yaml"), []byte(fmt.Sprintf(echoAgent, "old")), 0o644)

	daemon := exec.Command(filepath.Join(bin, "agentryd"))
	daemon.Dir = h.Dir
	daemon.Env = h.environ(map[string]string{
		"AGENTRY_TEMPORAL_ADDRESS":              gatewaytest.SharedTemporal(t),
		"AGENTRY_TEMPORAL_TASK_QUEUE":           "tq-cli-daemon",
		"AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL": fake.URL(),
	})
	var daemonErr bytes.Buffer
	daemon.Stdout, daemon.Stderr = &daemonErr, &daemonErr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- daemon.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			daemon.Process.Kill()
			<-done
		}
	}
	defer stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := h.run("server", "status")
		if r.Code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentryd did not come up:\n%s\n%s", r, daemonErr.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	keyFile := filepath.Join(h.WS, "credentials", "api_key")
	if _, err := os.Stat(keyFile); err != nil {
		t.Fatalf("the gateway did not generate a key: %v", err)
	}
	cur := h.run("--json", "context", "current").JSON(t)
	if cur["api_key_from"] != keyFile || cur["gateway_url"] != fmt.Sprintf("http://127.0.0.1:%d", port) {
		t.Fatalf("resolved target = %v", cur)
	}
	r := h.run("agent", "list")
	expectCode(t, r, 0, "agent list with the generated key")
	expectContains(t, r.Stdout, "alpha", "agent list")
	r = h.run("chat", "--agent", "alpha", "hi from the daemon test")
	expectCode(t, r, 0, "chat")
	expectContains(t, r.Stdout, "echo: hi from the daemon test", "reply")
	r = h.run("logs")
	expectCode(t, r, 0, "logs")
	expectContains(t, r.Stdout, "gateway listening", "startup line in the log buffer")

	r = h.run("workspace", "migrate", "-y")
	expectCode(t, r, 1, "migrate while running")
	expectContains(t, r.Stderr, "running", "reason")
	after := snapshot(t, legacy)
	if _, ok := after["old.yaml"]; !ok {
		t.Fatal("legacy file moved while the gateway runs")
	}
	stop()
	r = h.run("workspace", "migrate", "-y")
	expectCode(t, r, 0, "migrate once stopped")
	if _, err := os.Stat(filepath.Join(h.WS, "agents", "old.yaml")); err != nil {
		t.Fatal(err)
	}
	r = h.run("doctor")
	expectCode(t, r, 1, "doctor with the gateway stopped")
	expectContains(t, r.Stdout, "cannot reach the gateway", "gateway fail")
}
