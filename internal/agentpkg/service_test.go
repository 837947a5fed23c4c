package agentpkg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/agentdef"
)

func newService(t *testing.T) (*Service, string) {
	t.Helper()
	dir := t.TempDir()
	reg := agentdef.NewRegistry([]string{dir}, nil)
	return &Service{Files: agentdef.NewFiles(dir, reg), Env: Environment{
		Providers: func() []string { return []string{"openai"} },
		Channels:  func() []string { return []string{"http", "webhook"} },
	}}, dir
}

func TestImportDisabledThenOverwrite(t *testing.T) {
	s, dir := newService(t)
	doc := buildExample(t)
	ctx := context.Background()
	_, rep, err := s.Inspect(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing.Providers) != 0 || len(rep.Missing.Skills) != 1 || len(rep.Missing.Secrets) != 1 || rep.Exists {
		t.Fatalf("report = %+v", rep)
	}
	def, _, err := s.Import(ctx, doc, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if def.IsEnabled() {
		t.Fatal("imported enabled without --enable")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "triage", "tools", "lookup.py")); err != nil || !strings.Contains(string(b), "def lookup") {
		t.Fatalf("bundle: %v", err)
	}
	if _, _, err := s.Import(ctx, doc, true, false); !errors.Is(err, agentdef.ErrExists) {
		t.Fatalf("second import without overwrite: %v", err)
	}
	def, _, err = s.Import(ctx, doc, true, true)
	if err != nil || !def.IsEnabled() {
		t.Fatalf("overwrite: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestImportRefusesBadPackagesWritingNothing(t *testing.T) {
	s, dir := newService(t)
	for _, f := range []string{"tampered", "format-version-2", "path-escape"} {
		doc, err := os.ReadFile(filepath.Join("testdata", f+".agentry-agent.json"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Import(context.Background(), doc, true, true); KindOf(err) == "" {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("written: %v", entries)
	}
}

func TestExportRoundTrip(t *testing.T) {
	s, dir := newService(t)
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("id: a\nenabled: true\nllm: {provider: openai}\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "a", "prompts"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "prompts", "p.md"), []byte("hi"), 0o644)
	s.Files.Registry.Reload()
	ex, err := s.Export("a")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := ex.Package.Marshal()
	if _, err := Verify(doc, VerifyOptions{}); err != nil || len(ex.Package.Files) != 1 {
		t.Fatalf("%v %+v", err, ex.Package.Files)
	}
	if _, err := s.Export("ghost"); !errors.Is(err, agentdef.ErrNotFound) {
		t.Fatal(err)
	}
}
