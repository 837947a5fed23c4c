package openapi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the client from docs/openapi.yaml
// into a temporary folder and fails when openapi.gen.go differs: the
// document changed without `make generate`, or the file was edited by hand.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	dir := t.TempDir()
	cfg, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := filepath.Abs("overlay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The same configuration, writing into the temporary folder.
	cfgText := strings.Replace(string(cfg), "output: openapi.gen.go", "output: "+filepath.Join(dir, "openapi.gen.go"), 1)
	cfgText = strings.Replace(cfgText, "path: overlay.yaml", "path: "+overlay, 1)
	if cfgText == string(cfg) {
		t.Fatal("config.yaml no longer has the output and overlay lines this test rewrites")
	}
	tmpCfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(tmpCfg, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", tmpCfg, filepath.Join("..", "..", "..", "docs", "openapi.yaml"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, out)
	}
	fresh, err := os.ReadFile(filepath.Join(dir, "openapi.gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("openapi.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatal("internal/apiclient/openapi/openapi.gen.go is stale: docs/openapi.yaml or config.yaml changed; run `make generate` and commit the result")
	}
}
