package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/gitrepo"
)

// TestPackageInstallAPIRefusesBadInput: every bad request to
// /api/v1/package-installs is refused with the right 4xx in the error
// envelope and records nothing (a file:// source, which reads the gateway
// host's disk, is admin only); a git URL that is not a repository is a
// job that fails with a reason naming the cause and installs nothing.
func TestPackageInstallAPIRefusesBadInput(t *testing.T) {
	const (
		viewKey = "pkginstall-viewer-key-0123456789"
		opKey   = "pkginstall-operator-key-0123456789"
		jobs    = "/api/v1/package-installs"
	)
	g := gatewaytest.Start(t, gatewaytest.Options{Config: fmt.Sprintf(`auth:
  keys:
    - {subject: vera, key: %s, role: viewer}
    - {subject: olga, key: %s, role: operator}
`, viewKey, opKey)})
	notRepo := "file://" + t.TempDir()
	good := map[string]any{"source": notRepo, "allow_unverified": true}

	for _, c := range []struct {
		name, key string
		body      any
		status    int
		want      string
	}{
		{"no key", "", good, 401, ""},
		{"viewer", viewKey, good, 403, ""},
		{"host build by an operator", opKey, map[string]any{"source": "https://example.com/a.git", "allow_host_build": true}, 403, "admin"},
		{"file:// by an operator", opKey, good, 403, "admin"},
		{"empty body", gatewaytest.TestAPIKey, "", 400, "JSON object"},
		{"not JSON", gatewaytest.TestAPIKey, "source=x", 400, "not valid JSON"},
		{"wrong type", gatewaytest.TestAPIKey, `{"source": 7}`, 400, "source"},
		{"no source", gatewaytest.TestAPIKey, map[string]any{"allow_unverified": true}, 400, "source is empty"},
		{"not a git URL", gatewaytest.TestAPIKey, map[string]any{"source": "ftp://example.com/x.git"}, 400, "ftp://example.com/x.git"},
		{"an option", gatewaytest.TestAPIKey, map[string]any{"source": "--upload-pack=touch /tmp/x"}, 400, "not a git URL"},
		{"a password", gatewaytest.TestAPIKey, map[string]any{"source": "https://bob:hunter2@example.com/a.git"}, 400, "carries a password"},
		{"too long", gatewaytest.TestAPIKey, map[string]any{"source": "https://example.com/" + strings.Repeat("a", 2100)}, 400, "longer than"},
		{"NUL", gatewaytest.TestAPIKey, `{"source": "https://example.com/a\u0000.git"}`, 400, "NUL"},
	} {
		r := g.DoAs(c.key, "POST", jobs, c.body)
		msg, _ := r.JSON["error"].(string)
		if r.Status != c.status || msg == "" || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, r.Status, r.Raw, c.status, c.want)
		}
		if strings.Contains(string(r.Raw), "hunter2") {
			t.Errorf("%s: the answer repeats the password: %s", c.name, r.Raw)
		}
	}
	if r := g.Do("GET", jobs+"/pkginstall-0000000000000000", nil); r.Status != 404 || r.JSON["error"] == nil {
		t.Errorf("unknown job: %d %s", r.Status, r.Raw)
	}
	if r := g.DoAs("", "GET", jobs, nil); r.Status != 401 {
		t.Errorf("list without a key: %d", r.Status)
	}
	if r := g.Do("GET", jobs, nil); r.Status != 200 || r.JSON["count"] != float64(0) {
		t.Fatalf("refused requests recorded jobs: %d %s", r.Status, r.Raw)
	}

	// Well-formed, but not a repository: the job fails and says why.
	r := g.Do("POST", jobs, good)
	id, _ := r.JSON["id"].(string)
	if r.Status != 202 || !strings.HasPrefix(id, "pkginstall-") {
		t.Fatalf("start: %d %s", r.Status, r.Raw)
	}
	var job gatewaytest.Response
	waitFor(t, 60*time.Second, "the job to end", func() bool {
		job = g.Do("GET", jobs+"/"+id, nil)
		return job.JSON["status"] == "failed" || job.JSON["status"] == "succeeded"
	})
	if msg, _ := job.JSON["error"].(string); job.JSON["status"] != "failed" || !strings.Contains(msg, "not a git repository") {
		t.Fatalf("job %s", job.Raw)
	}
	if entries, _ := os.ReadDir(filepath.Join(g.Workspace, "agents")); len(entries) != 0 {
		t.Fatalf("a failed job left agents: %v", entries)
	}
	if entries, _ := os.ReadDir(filepath.Join(g.Workspace, "data", "package-installs")); len(entries) != 0 {
		t.Fatalf("a failed job left its checkout: %v", entries)
	}
}

// TestPackageInstallHostBuildCatalog: a team gateway builds on its host
// only sources of package_installs.host_build_catalog; anything else is
// 403 before a job is recorded, even for an admin.
func TestPackageInstallHostBuildCatalog(t *testing.T) {
	src := map[string]string{"agent.yaml": "id: cataloged\n", "agentry-build.sh": "mkdir -p prompts && echo built > prompts/built.md\n"}
	approved, other := gitrepo.Bare(t, src), gitrepo.Bare(t, src)
	g := gatewaytest.Start(t, gatewaytest.Options{Config: fmt.Sprintf("server: {edition: team}\npackage_installs: {host_build_catalog: [%q]}\n", approved)})
	const jobs = "/api/v1/package-installs"
	r := g.Do("POST", jobs, map[string]any{"source": other, "allow_unverified": true, "allow_host_build": true})
	if msg, _ := r.JSON["error"].(string); r.Status != 403 || r.JSON["code"] != "host_build_not_approved" || !strings.Contains(msg, "host_build_catalog") {
		t.Fatalf("a source outside the catalog: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("GET", jobs, nil); r.JSON["count"] != float64(0) {
		t.Fatalf("the refusal recorded a job: %s", r.Raw)
	}
	r = g.Do("POST", jobs, map[string]any{"source": approved, "allow_unverified": true, "allow_host_build": true})
	id, _ := r.JSON["id"].(string)
	if r.Status != 202 || id == "" {
		t.Fatalf("a catalog source: %d %s", r.Status, r.Raw)
	}
	waitFor(t, 60*time.Second, "the job to end", func() bool {
		r = g.Do("GET", jobs+"/"+id, nil)
		return r.JSON["status"] == "failed" || r.JSON["status"] == "succeeded"
	})
	if r.JSON["status"] != "succeeded" || r.JSON["agent_id"] != "cataloged" {
		t.Fatalf("job %s", r.Raw)
	}
}
