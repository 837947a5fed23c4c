package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestKnowledgeBadInputAndCLI (issue 45, Bad input): unsupported, binary,
// unparsable, oversized and escaping files and a private URL fail with
// their reason while the rest of the base ingests; bad requests are 4xx;
// the client lists, searches and adds with --json.
func TestKnowledgeBadInputAndCLI(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, "handbook")
	outside := t.TempDir()
	files := map[string]string{
		"leave.md":   "# Leave\n\nEmployees get 27 days of paid leave a year.\n",
		"travel.txt": "Travel above 500 EUR needs the approval of a director.\n",
		"tool.exe":   "MZ\x00\x00",
		"blob.txt":   "abc\x00\x01\x02",
		"broken.pdf": "%PDF-1.7 broken",
	}
	os.MkdirAll(dir, 0o755)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(outside, "secret.md"), []byte("the secret"), 0o644)
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	big, _ := os.Create(filepath.Join(dir, "huge.md"))
	big.Truncate(200 << 20) // sparse: 200 MB on paper
	big.Close()
	cfg := knowledgeConfig + "    handbook: {description: company rules, sources: [handbook, 'http://127.0.0.1:9/private.html']}\n"
	g := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Config: cfg, Agents: map[string]string{"helper.yaml": knowledgeAgent}})
	waitBaseSettled(t, g, "handbook", 8, time.Minute)
	r := g.Do("GET", "/api/v1/knowledge/bases/handbook/documents", nil)
	want := map[string]string{"leave.md": "", "travel.txt": "", "tool.exe": "unsupported file type", "blob.txt": "binary content",
		"broken.pdf": "does not parse", "link.md": "leads out of its source folder", "huge.md": "over the limit", "private.html": "SSRF"}
	got := map[string]bool{}
	for _, d := range r.JSON["documents"].([]any) {
		dm := d.(map[string]any)
		name := filepath.Base(dm["source"].(string))
		reason, ok := want[name]
		if !ok {
			continue
		}
		got[name] = true
		if reason == "" && dm["status"] != "ready" || reason != "" && (dm["status"] != "failed" || !strings.Contains(dm["error"].(string), reason)) {
			t.Errorf("%s: %v %v, want %q", name, dm["status"], dm["error"], reason)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("documents %v, want %v: %s", got, want, r.Raw)
	}

	for _, c := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"POST", "/api/v1/knowledge/bases/handbook/search", map[string]any{"query": ""}, 400},
		{"POST", "/api/v1/knowledge/bases/handbook/search", map[string]any{"query": "x", "k": 500}, 400},
		{"POST", "/api/v1/knowledge/bases/nope/search", map[string]any{"query": "x"}, 404},
		{"GET", "/api/v1/knowledge/bases/nope", nil, 404},
		{"POST", "/api/v1/knowledge/bases/handbook/sources", map[string]any{"source": "../../etc/passwd"}, 400},
		{"POST", "/api/v1/knowledge/bases/handbook/sources", map[string]any{"source": "http://169.254.169.254/latest"}, 400},
		{"POST", "/api/v1/knowledge/bases/handbook/sources", "not json", 400},
	} {
		if r := g.Do(c.method, c.path, c.body); r.Status != c.status || r.JSON["error"] == nil {
			t.Errorf("%s %s %v: %d %s, want %d with an error envelope", c.method, c.path, c.body, r.Status, r.Raw, c.status)
		}
	}
	if r := g.DoAs("", "GET", "/api/v1/knowledge/bases", nil); r.Status != 401 {
		t.Errorf("no key: %d", r.Status)
	}
	// A 100 KB query is cut, not refused.
	r = g.Do("POST", "/api/v1/knowledge/bases/handbook/search", map[string]any{"query": strings.Repeat("leave days ", 10000)})
	if r.Status != 200 || r.JSON["truncated"] != true {
		t.Errorf("100 KB query: %d %.300s", r.Status, r.Raw)
	}

	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	if res := h.run("knowledge", "list", "--json"); res.Code != 0 || !strings.Contains(res.Stdout, `"handbook"`) {
		t.Fatalf("knowledge list: %s", res)
	}
	if res := h.run("knowledge", "search", "handbook", "how", "many", "days", "of", "leave"); res.Code != 0 || !strings.Contains(res.Stdout, "27 days") || !strings.Contains(res.Stdout, "leave.md#0") {
		t.Fatalf("knowledge search: %s", res)
	}
	if res := h.run("knowledge", "documents", "handbook"); res.Code != 0 || !strings.Contains(res.Stdout, "unsupported file type") {
		t.Fatalf("knowledge documents: %s", res)
	}
	os.WriteFile(filepath.Join(ws, "extra.md"), []byte("The canteen opens at 11:30.\n"), 0o644)
	if res := h.run("knowledge", "add", "handbook", "extra.md", "--json"); res.Code != 1 || !strings.Contains(res.Stderr, "handbook:") {
		// exit 1: the base has failed documents (listed), yet the new one is ready
		t.Fatalf("knowledge add: %s", res)
	}
	if res := h.run("knowledge", "search", "handbook", "canteen", "--json"); res.Code != 0 || !strings.Contains(res.Stdout, "11:30") {
		t.Fatalf("search after add: %s", res)
	}
	if res := h.run("knowledge", "add", "handbook", "../x.md"); res.Code == 0 || !strings.Contains(res.Stderr, "out of the workspace") {
		t.Fatalf("knowledge add ../x.md: %s", res)
	}
}

// waitBaseSettled polls until the base has docs documents and none is
// queued or indexing.
func waitBaseSettled(t *testing.T, g *gatewaytest.Gateway, base string, docs int, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last gatewaytest.Response
	for time.Now().Before(deadline) {
		last = g.Do("GET", "/api/v1/knowledge/bases/"+base, nil)
		if last.Status == 200 && last.JSON["documents"] == float64(docs) && last.JSON["queued"] == nil && last.JSON["indexing"] == nil ||
			last.Status == 200 && last.JSON["documents"] == float64(docs) && last.JSON["queued"] == float64(0) && last.JSON["indexing"] == float64(0) {
			return last.JSON
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("base %s not settled with %d documents within %s: %d %s", base, docs, timeout, last.Status, last.Raw)
	return nil
}
