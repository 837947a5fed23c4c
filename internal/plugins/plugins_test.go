package plugins

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/sandbox"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// examplePlugin builds dev/exampleplugin once and copies it with its
// manifest into a plugins folder of dir.
func examplePlugin(t testing.TB, pluginsDir string) string {
	t.Helper()
	buildOnce.Do(func() {
		out := filepath.Join(os.TempDir(), "agentry-test-greeter-"+runtime.GOARCH)
		cmd := exec.Command("go", "build", "-o", out, "github.com/agentryhq/agentry/dev/exampleplugin")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			t.Logf("%s", b)
		}
		built = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir := filepath.Join(pluginsDir, "greeter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.ReadFile(built)
	if err := os.WriteFile(filepath.Join(dir, "greeter"), exe, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest, _ := os.ReadFile("../../dev/exampleplugin/plugin.yaml")
	if err := os.WriteFile(filepath.Join(dir, ManifestName), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writePlugin(t *testing.T, root, name, manifest string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestManifestsThatLieOrEscapeAreNotLoaded(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "evil")
	os.WriteFile(outside, []byte("#!/bin/sh\n"), 0o755)
	d := writePlugin(t, root, "link", "id: link\nversion: 1\nexecutable: run\n")
	os.Symlink(outside, filepath.Join(d, "run"))
	d = writePlugin(t, root, "noexec", "id: noexec\nversion: 1\nexecutable: run\n")
	os.WriteFile(filepath.Join(d, "run"), []byte("#!/bin/sh\n"), 0o644)
	d = writePlugin(t, root, "dirlink", "id: dirlink\nversion: 1\nexecutable: sub/evil\n")
	os.Symlink(filepath.Dir(outside), filepath.Join(d, "sub"))
	writePlugin(t, root, "dotdot", "id: dotdot\nversion: 1\nexecutable: ../link/run\n")
	writePlugin(t, root, "abs", "id: abs\nversion: 1\nexecutable: /bin/sh\n")
	writePlugin(t, root, "missing", "id: missing\nversion: 1\nexecutable: nothere\n")
	writePlugin(t, root, "badid", "id: Bad__ID\nversion: 1\nexecutable: x\n")
	writePlugin(t, root, "typo", "id: typo\nversion: 1\nexecutible: x\n")
	writePlugin(t, root, "proto", "id: proto\nversion: 1\nexecutable: x\nprotocol: grpc\n")
	want := map[string]string{
		"link":    "escapes the plugin folder (a symlink to",
		"noexec":  "is not executable",
		"dirlink": "escapes the plugin folder (a symlink to",
		"dotdot":  "escapes the plugin folder (..)",
		"abs":     "must be relative to the plugin folder",
		"missing": "does not exist in the plugin folder",
		"badid":   `id "Bad__ID" must be`,
		"typo":    "field executible not found",
		"proto":   `protocol "grpc" is not supported`,
	}
	got := Scan([]string{root})
	if len(got) != len(want) {
		t.Fatalf("scanned %d plugins, want %d", len(got), len(want))
	}
	for _, p := range got {
		w := want[filepath.Base(p.Dir)]
		if p.Status != "invalid" || !strings.Contains(p.Error, w) {
			t.Errorf("%s: status %s, error %q; want %q", filepath.Base(p.Dir), p.Status, p.Error, w)
		}
	}
}

func newRegistry(t testing.TB, dirs []string, cfg map[string]any) (*Registry, *mcp.Manager) {
	t.Helper()
	m := mcp.NewManager(mcp.Policy{SSRF: netguard.Policy{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(m.Close)
	jail := sandbox.NewJail(sandbox.JailConfig{})
	if err := jail.Ready(sandbox.Request{Argv: []string{"/x"}}); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	caps := sandbox.DefaultCaps()
	caps.CPUTime = time.Hour
	return &Registry{Dirs: dirs, Config: cfg, Jail: jail, Caps: caps, WorkDir: t.TempDir(), Servers: m}, m
}

func waitRunning(t testing.TB, r *Registry, id string) Plugin {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, p := range r.List() {
			if p.ID == id && p.Status == "running" {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin %s not running: %+v", id, r.List())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The example plugin runs confined, gets its plugins_config, offers its
// tool through the MCP manager, restarts when its config changes and stops
// when its folder goes.
func TestExamplePluginRunsSandboxedAndHotReloads(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := examplePlugin(t, root)
	r, m := newRegistry(t, []string{root}, map[string]any{"greeter": map[string]any{"greeting": "Ahoy"}})
	r.Rescan(ctx)
	p := waitRunning(t, r, "greeter")
	if strings.Join(p.Offered, ",") != "greet" || len(p.Missing) != 0 || p.Version != "1.0.0" {
		t.Fatalf("listed %+v", p)
	}
	spec, _ := m.Spec("greeter")
	if !strings.Contains(spec.Command+" "+strings.Join(spec.Args, " "), "bwrap") && !strings.Contains(spec.Command, "prlimit") {
		t.Fatalf("not confined: %s %v", spec.Command, spec.Args)
	}
	res, err := m.Call(ctx, "mcp__greeter__greet", []byte(`{"name":"Ada"}`))
	if err != nil || res.Content != "Ahoy, Ada!" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	// A new config restarts it on rescan.
	r.Config = map[string]any{"greeter": map[string]any{"greeting": "Hej"}}
	r.Rescan(ctx)
	waitRunning(t, r, "greeter")
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err = m.Call(ctx, "mcp__greeter__greet", []byte(`{"name":"Ada"}`))
		if err == nil && res.Content == "Hej, Ada!" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the config change: %+v, %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The folder goes: the plugin stops.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r.Rescan(ctx)
	if _, ok := m.Get("greeter"); ok || len(r.List()) != 0 {
		t.Fatalf("removed plugin still there: %+v", r.List())
	}
}
