package e2e

// End-to-end tests of agent packages, registries and pull with the real
// binaries: agentryd registry keygen/serve, agentry agent package
// export/inspect/import, registry probe/add/list and pull, against real
// gateways and registries on loopback.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/registry"
)

const triageAgent = `id: triage
description: Sorts tickets
system_prompt: You triage support tickets by urgency.
llm: {provider: openai, model: gpt-4o-mini}
channels: [webhook]
skills: [ticket-lookup]
api_key: sk-never-exported
`

// tarGzFile packs files (name -> content) into a .tar.gz at path.
func tarGzFile(t *testing.T, path string, files map[string][]byte) {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
		tw.Write(data)
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAgentPackagesEndToEnd(t *testing.T) {
	src := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{"triage.yaml": triageAgent}})
	os.MkdirAll(filepath.Join(src.Workspace, "agents", "triage", "prompts"), 0o755)
	os.WriteFile(filepath.Join(src.Workspace, "agents", "triage", "prompts", "classify.md"), []byte("Classify it.\n"), 0o644)
	dst := gatewaytest.Start(t, gatewaytest.Options{})
	h := newHome(t)
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	agentryd := filepath.Join(binaries(t), "agentryd")

	// keygen: private key 0600, public key on stdout; never replaced.
	keyFile := filepath.Join(h.Dir, "signing.key")
	r := h.exec(agentryd, nil, "", "registry", "keygen", "--out", keyFile)
	expectCode(t, r, 0, "keygen")
	pub := strings.TrimSpace(r.Stdout)
	if b, err := hex.DecodeString(pub); err != nil || len(b) != 32 {
		t.Fatalf("public key %q", pub)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	r = h.exec(agentryd, nil, "", "registry", "keygen", "--out", keyFile)
	expectCode(t, r, 1, "keygen over an existing key")
	expectContains(t, r.Stderr, "exists", "keygen refusal")

	// export, signed on the client.
	pkg := filepath.Join(h.Dir, "triage.agentry-agent.json")
	r = h.run("--gateway", src.URL(), "agent", "package", "export", "triage", "--out", pkg, "--signing-key-file", keyFile)
	expectCode(t, r, 0, "export")
	expectContains(t, r.Stdout, "signed by key", "export says signed")
	data, _ := os.ReadFile(pkg)
	if bytes.Contains(data, []byte("sk-never-exported")) || !bytes.Contains(data, []byte("prompts/classify.md")) {
		t.Fatalf("package content:\n%s", data)
	}

	// inspect against the target: verified, lists what is missing.
	r = h.run("--gateway", dst.URL(), "agent", "package", "inspect", pkg, "--trusted-key", pub)
	expectCode(t, r, 0, "inspect")
	expectContains(t, r.Stdout, "signature verifies", "inspect signature")
	expectContains(t, r.Stdout, "skills: ticket-lookup", "missing skill")
	expectContains(t, r.Stdout, "secrets: api_key", "missing secret")
	js := h.run("--gateway", dst.URL(), "--json", "agent", "package", "inspect", pkg).JSON(t)
	if js["verified"] != true || js["agent_id"] != "triage" {
		t.Fatalf("inspect --json: %v", js)
	}

	// Tamper one byte: refused by inspect, import (client and gateway) and pull.
	tampered := filepath.Join(h.Dir, "tampered.agentry-agent.json")
	os.WriteFile(tampered, bytes.Replace(data, []byte("by urgency"), []byte("by urgencY"), 1), 0o644)
	dstAgents := filepath.Join(dst.Workspace, "agents")
	os.MkdirAll(dstAgents, 0o755)
	before := snapshot(t, dstAgents)
	for _, args := range [][]string{{"inspect", tampered}, {"import", tampered}, {"import", tampered, "--enable", "--overwrite"}} {
		r = h.run(append([]string{"--gateway", dst.URL(), "agent", "package"}, args...)...)
		expectCode(t, r, 1, strings.Join(args, " "))
		expectContains(t, r.Stderr, "checksum mismatch", "names the cause")
	}
	resp := dst.Do(http.MethodPost, "/api/v1/agent-packages/import", readFile(t, tampered))
	if resp.Status != 400 || !strings.Contains(string(resp.Raw), "checksum_mismatch") {
		t.Fatalf("gateway import of a tampered package: %d %s", resp.Status, resp.Raw)
	}
	sameTree(t, before, snapshot(t, dstAgents), "after tampered imports")
	other := filepath.Join(h.Dir, "other.key")
	h.exec(agentryd, nil, "", "registry", "keygen", "--out", other)
	otherPub := strings.TrimSpace(h.exec(agentryd, nil, "", "registry", "keygen", "--out", other+"2").Stdout)
	r = h.run("--gateway", dst.URL(), "agent", "package", "import", pkg, "--trusted-key", otherPub)
	expectCode(t, r, 1, "import with another trusted key")
	expectContains(t, r.Stderr, "not the trusted key", "untrusted key")

	// import: disabled by default, refuses an existing id, --overwrite replaces.
	r = h.run("--gateway", dst.URL(), "agent", "package", "import", pkg, "--trusted-key", pub)
	expectCode(t, r, 0, "import")
	expectContains(t, r.Stdout, "disabled", "imported disabled")
	got := h.run("--gateway", dst.URL(), "--json", "agent", "get", "triage").JSON(t)
	if got["enabled"] != false {
		t.Fatalf("imported agent: %v", got)
	}
	if b, err := os.ReadFile(filepath.Join(dstAgents, "triage", "prompts", "classify.md")); err != nil || string(b) != "Classify it.\n" {
		t.Fatalf("bundle on the target: %q %v", b, err)
	}
	r = h.run("--gateway", dst.URL(), "agent", "package", "import", pkg)
	expectCode(t, r, 1, "second import")
	expectContains(t, r.Stderr, "--overwrite", "hint")
	r = h.run("--gateway", dst.URL(), "agent", "package", "import", pkg, "--overwrite", "--enable")
	expectCode(t, r, 0, "import --overwrite --enable")
	if got := h.run("--gateway", dst.URL(), "--json", "agent", "get", "triage").JSON(t); got["enabled"] != true {
		t.Fatalf("after --overwrite --enable: %v", got)
	}

	// A registry on loopback, signed with the key.
	pkgDir := filepath.Join(h.Dir, "packages")
	os.MkdirAll(pkgDir, 0o755)
	tarGzFile(t, filepath.Join(pkgDir, "triage-1.0.0.tar.gz"), map[string][]byte{"triage.agentry-agent.json": data})
	tarGzFile(t, filepath.Join(pkgDir, "triage-1.1.0.tar.gz"), map[string][]byte{"triage.agentry-agent.json": data, "README.md": []byte("v1.1\n")})
	port := freePort(t)
	regURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	reg := gatewaytest.StartProcess(t, agentryd, nil, "registry", "serve", "--dir", pkgDir, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--signing-key-file", keyFile)
	gatewaytest.WaitHTTP(t, regURL+"/index.json", 60*time.Second, reg)

	r = h.run("registry", "probe", regURL)
	expectCode(t, r, 0, "probe")
	expectContains(t, r.Stdout, "triage: 1.1.0, 1.0.0", "probe lists versions newest first")
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>sign in</html>"))
	}))
	defer html.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	r = h.run("registry", "add", html.URL, "-y")
	expectCode(t, r, 1, "add an HTML page")
	expectContains(t, r.Stderr, "HTML page", "names HTML")
	r = h.run("registry", "probe", missing.URL)
	expectCode(t, r, 1, "probe a 404")
	expectContains(t, r.Stderr, "HTTP 404", "names 404")
	r = h.run("registry", "add", regURL, "--id", "local", "--priority", "5", "-y")
	expectCode(t, r, 0, "registry add")
	lj := h.run("--json", "registry", "list").JSON(t)
	regs := lj["registries"].([]any)
	if len(regs) != 1 || regs[0].(map[string]any)["signing_key_id"] == nil || regs[0].(map[string]any)["priority"] != float64(5) {
		t.Fatalf("registry list: %v", lj)
	}

	// pull: remote target refused with nothing written.
	homeBefore := snapshot(t, h.Home)
	r = h.run("--gateway", "http://192.0.2.10:18789", "pull", "local/triage")
	expectCode(t, r, 1, "remote pull")
	expectContains(t, r.Stderr, "no local files changed", "remote refusal")
	sameTree(t, homeBefore, snapshot(t, h.Home), "after the remote pull refusal")

	// pull with the pinned key: newest release, verified, unpacked.
	r = h.run("pull", "local/triage")
	expectCode(t, r, 0, "pull")
	expectContains(t, r.Stdout, "triage@1.1.0", "newest release")
	expectContains(t, r.Stdout, "signature by key", "signature checked")
	pulled := filepath.Join(h.WS, "packages", "triage")
	if _, err := os.Stat(filepath.Join(pulled, "README.md")); err != nil {
		t.Fatal(err)
	}
	r = h.run("pull", "triage@1.0.0")
	expectCode(t, r, 1, "pull over an existing folder")
	expectContains(t, r.Stderr, "--force", "hint")
	r = h.run("--json", "pull", "triage@1.0.0", "--force")
	expectCode(t, r, 0, "pull --force")
	if r.JSON(t)["version"] != "1.0.0" {
		t.Fatal(r)
	}

	// A registry signed by another key, and one that alters archives in
	// transit: refused, nothing written.
	otherKey := func() ed25519.PrivateKey { _, k, _ := ed25519.GenerateKey(rand.Reader); return k }()
	impostor := httptest.NewServer(&registry.Server{Dir: pkgDir, Key: otherKey})
	defer impostor.Close()
	plain := &registry.Server{Dir: pkgDir, Key: nil}
	altering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, ".tar.gz") {
			b, _ := os.ReadFile(filepath.Join(pkgDir, filepath.Base(req.URL.Path)))
			b[len(b)-3] ^= 1
			w.Write(b)
			return
		}
		plain.ServeHTTP(w, req)
	}))
	defer altering.Close()
	unsigned := httptest.NewServer(&registry.Server{Dir: pkgDir})
	defer unsigned.Close()
	signedBy := func(url, key string) string {
		s := fmt.Sprintf("  - {id: r, base_url: %q", url)
		if key != "" {
			s += fmt.Sprintf(", signing_key: %s", key)
		}
		return s + "}\n"
	}
	for name, c := range map[string]struct{ entry, want string }{
		"another key":      {signedBy(impostor.URL, pub), "does not verify"},
		"altered":          {signedBy(altering.URL, ""), "checksum"},
		"unsigned, keyed":  {signedBy(unsigned.URL, pub), "unsigned"},
		"unsigned, no key": {signedBy(unsigned.URL, ""), ""},
	} {
		t.Run(name, func(t *testing.T) {
			h2 := newHome(t)
			h2.writeConfig(fmt.Sprintf("server: {port: %d}\nregistries:\n%s", freePort(t), c.entry))
			before := snapshot(t, h2.Home)
			r := h2.run("pull", "r/triage")
			if c.want == "" {
				expectCode(t, r, 0, "pull from an unsigned registry without a key")
				expectContains(t, r.Stdout, "checksum verified", "checksum still checked")
				return
			}
			expectCode(t, r, 1, name)
			expectContains(t, r.Stderr, c.want, "names the cause")
			expectContains(t, r.Stderr, "nothing was written", "says nothing was written")
			sameTree(t, before, snapshot(t, h2.Home), "after a refused pull")
		})
	}
}

// readFile reads a file as a raw request body.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBuildWithExampleDriver: agentryd build --with the example driver
// makes a binary that starts and lists the driver. It needs the module
// cache (the build must not download anything); CI provides it.
func TestBuildWithExampleDriver(t *testing.T) {
	root := moduleRoot(t)
	// (Read-only: -mod=mod here would rewrite the checkout's go.mod.)
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/spf13/cobra")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) == "" {
		t.Skipf("module cache unavailable: %v %s", err, out)
	}
	h := newHome(t)
	h.Dir = root
	agentryd := filepath.Join(binaries(t), "agentryd")
	out := filepath.Join(t.TempDir(), "bin", "agentryd")

	// Bad input first: nothing is built or written.
	r := h.exec(agentryd, nil, "", "build", "--with", "not a module!", "-o", out)
	expectCode(t, r, 2, "bad --with")
	expectContains(t, r.Stderr, "not a Go module", "names the cause")
	r = h.exec(agentryd, map[string]string{"PATH": t.TempDir()}, "", "build", "-o", out)
	expectCode(t, r, 1, "no Go toolchain")
	expectContains(t, r.Stderr, "Go toolchain", "names the cause")
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("%s written by a refused build", out)
	}

	// Build like the harness built agentryd (gatewaytest.Binary), with the
	// caller's build and module caches (the test's HOME is a fresh folder
	// and Go derives both from HOME: without them the build starts cold and
	// downloads every module, ten minutes here), so the compiled packages
	// are reused and only main is compiled and linked. The caller's
	// GOPROXY stays: a fresh machine's module cache holds what building
	// this module needed, but the generated module's graph may also need
	// the go.mod of a version nothing here builds (CI failed with
	// GOPROXY=off on filippo.io/edwards25519@v1.1.0, required by the
	// MySQL driver's go.mod); that one file is fetched, not every module.
	goEnv := callerGoEnv(t)
	// go build may take minutes on a loaded machine: a longer bound than
	// h.exec's, and the whole process group is stopped on timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, agentryd, "build", "--with", "github.com/agentryhq/agentry/drivers/example/uppercase", "-o", out, "--keep=false")
	build.Dir, build.Env = root, h.environ(goEnv)
	build.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	build.Cancel = func() error { return syscall.Kill(-build.Process.Pid, syscall.SIGKILL) }
	output, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("build --with: %v\n%s", err, output)
	}
	expectContains(t, string(output), "verify:", "verified the result")
	r = h.exec(out, nil, "", "drivers", "--json")
	expectCode(t, r, 0, "flavored drivers")
	expectContains(t, r.Stdout, `"uppercase"`, "the example driver is built in")
	r = h.exec(agentryd, nil, "", "drivers")
	expectContains(t, r.Stdout, "No drivers built in", "the plain binary has none")
}

// callerGoEnv is the go command's settings of this test process that a
// child with another HOME would otherwise lose (they default to folders
// under HOME or come from HOME's go/env file).
func callerGoEnv(t *testing.T) map[string]string {
	t.Helper()
	keys := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE"}
	out, err := exec.Command("go", append([]string{"env", "-json"}, keys...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("go env -json: %v\n%s", err, out)
	}
	return env
}
