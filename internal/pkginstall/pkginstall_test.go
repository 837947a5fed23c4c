package pkginstall

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/gitrepo"
	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/netguard/ssrftest"
	"github.com/agentryhq/agentry/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const sourceAgent = "id: triage\ndescription: Sorts tickets\nllm: {provider: openai, model: gpt-4o-mini}\napi_key: sk-never-installed-0123\n"

// newService is a service over a SQLite store and an agents folder, with
// no Temporal: the tests drive the steps the workflow's activities run.
func newService(t *testing.T, trusted ...ed25519.PublicKey) (*Service, string) {
	t.Helper()
	st, err := models.Open(context.Background(), models.Options{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agents := t.TempDir()
	files := agentdef.NewFiles(agents, agentdef.NewRegistry([]string{agents}, nil))
	return &Service{Store: st, Packages: &agentpkg.Service{Files: files}, WorkDir: t.TempDir(),
		TrustedKeys: func() []ed25519.PublicKey { return trusted }}, agents
}

// newJob records a job as Start would (without starting a workflow).
func newJob(t *testing.T, s *Service, req Request) string {
	t.Helper()
	if err := ValidateSource(req.Source); err != nil {
		t.Fatal(err)
	}
	j := &models.PackageInstallJob{ID: NewJobID(), Source: req.Source, AllowUnverified: req.AllowUnverified,
		AllowHostBuild: req.AllowHostBuild, Enable: req.Enable, Overwrite: req.Overwrite, Status: models.PackageInstallQueued}
	if err := s.Store.CreatePackageInstallJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// runSteps runs the steps in the workflow's order and returns the first
// error.
func runSteps(s *Service, id string) error {
	ctx := context.Background()
	if _, err := s.Fetch(ctx, id); err != nil {
		return err
	}
	build, err := s.Verify(ctx, id)
	if err != nil {
		return err
	}
	if build {
		if err := s.Build(ctx, id); err != nil {
			return err
		}
	}
	_, err = s.Install(ctx, id)
	return err
}

func refusal(t *testing.T, err error, want string) {
	t.Helper()
	var r *RefusedError
	if !errors.As(err, &r) || !strings.Contains(r.Msg, want) {
		t.Fatalf("want a refusal naming %q, got %v", want, err)
	}
}

func TestRawSourceNeedsApprovalThenInstallsOnce(t *testing.T) {
	s, agents := newService(t)
	url := gitrepo.Bare(t, map[string]string{"agent.yaml": sourceAgent, "prompts/classify.md": "Classify it.\n"})

	refusal(t, runSteps(s, newJob(t, s, Request{Source: url})), "--allow-unverified")
	if _, err := os.Stat(filepath.Join(agents, "triage.yaml")); !os.IsNotExist(err) {
		t.Fatal("an unapproved source was installed")
	}

	id := newJob(t, s, Request{Source: url, AllowUnverified: true})
	if err := runSteps(s, id); err != nil {
		t.Fatal(err)
	}
	job, _ := s.Get(context.Background(), id)
	if job.Status != models.PackageInstallSucceeded || job.AgentID != "triage" || len(job.Commit) != 40 || job.Signed {
		t.Fatalf("job %+v", job)
	}
	def, err := os.ReadFile(filepath.Join(agents, "triage.yaml"))
	if err != nil || strings.Contains(string(def), "sk-never-installed") || !strings.Contains(string(def), "enabled: false") {
		t.Fatalf("installed definition (%v):\n%s", err, def)
	}
	if b, err := os.ReadFile(filepath.Join(agents, "triage", "prompts", "classify.md")); err != nil || string(b) != "Classify it.\n" {
		t.Fatalf("bundle: %v %q", err, b)
	}
	var steps []string
	for _, p := range job.Progress {
		steps = append(steps, p.Step)
	}
	if got := strings.Join(steps, ","); got != "fetch,fetch,verify,verify,install,install" {
		t.Fatalf("progress steps %s: %+v", got, job.Progress)
	}
	// The install step again (its answer was lost in a crash): done, not
	// "exists", and nothing written twice.
	if _, err := s.Install(context.Background(), id); err != nil {
		t.Fatalf("install retried: %v", err)
	}
	// Another job for the same agent without --overwrite is refused.
	refusal(t, runSteps(s, newJob(t, s, Request{Source: url, AllowUnverified: true})), "overwrite")
}

func TestHostBuildNeedsItsOwnApproval(t *testing.T) {
	s, agents := newService(t)
	url := gitrepo.Bare(t, map[string]string{
		"agent.yaml":       sourceAgent,
		"agentry-build.sh": "mkdir -p prompts && echo \"built in $PWD\" > prompts/generated.md\n",
	})
	refusal(t, runSteps(s, newJob(t, s, Request{Source: url, AllowUnverified: true})), "--allow-host-build")
	if _, err := os.Stat(filepath.Join(agents, "triage.yaml")); !os.IsNotExist(err) {
		t.Fatal("installed without the build approval")
	}
	if err := runSteps(s, newJob(t, s, Request{Source: url, AllowUnverified: true, AllowHostBuild: true, Enable: true})); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(agents, "triage", "prompts", "generated.md")); err != nil || !strings.Contains(string(b), "built in") {
		t.Fatalf("the build's output was not packaged: %v %q", err, b)
	}

	failing := gitrepo.Bare(t, map[string]string{"agent.yaml": sourceAgent, "agentry-build.sh": "echo compiler exploded >&2; exit 3\n"})
	refusal(t, runSteps(s, newJob(t, s, Request{Source: failing, AllowUnverified: true, AllowHostBuild: true, Overwrite: true})), "compiler exploded")
}

func TestSignedPackageIsVerifiedByATrustedKey(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	otherPub, _, _ := ed25519.GenerateKey(nil)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte(sourceAgent), 0o644)
	ex, err := agentpkg.Build([]byte(sourceAgent), dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := ex.Package.Marshal()
	signed, err := agentpkg.Sign(doc, priv)
	if err != nil {
		t.Fatal(err)
	}
	url := gitrepo.Bare(t, map[string]string{"triage.agentry-agent.json": string(signed)})

	s, _ := newService(t, pub)
	id := newJob(t, s, Request{Source: url})
	if err := runSteps(s, id); err != nil {
		t.Fatal(err)
	}
	if job, _ := s.Get(context.Background(), id); !job.Signed || !strings.Contains(job.Progress[3].Message, "trusted key") {
		t.Fatalf("job %+v", job)
	}

	s2, _ := newService(t, otherPub)
	refusal(t, runSteps(s2, newJob(t, s2, Request{Source: url})), "no configured registry trusts")

	tampered := strings.Replace(string(signed), "Sorts tickets", "Sorts tickeTs", 1)
	s3, agents := newService(t, pub)
	refusal(t, runSteps(s3, newJob(t, s3, Request{Source: gitrepo.Bare(t, map[string]string{"x.agentry-agent.json": tampered}), AllowUnverified: true})), "checksum")
	if entries, _ := os.ReadDir(agents); len(entries) != 0 {
		t.Fatalf("a tampered package left %v", entries)
	}
}

func TestBadSources(t *testing.T) {
	for _, src := range []string{"", "-uhttps://x", "ftp://example.com/r.git", "https://", "not a url", "file://", "https://bob:hunter2@example.com/a.git"} {
		if err := ValidateSource(src); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v", src, err)
		}
	}
	for _, src := range []string{"https://example.com/a/b.git", "git@example.com:a/b.git", "file:///srv/git/a.git", "ssh://git@example.com/a"} {
		if err := ValidateSource(src); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
	if err := ValidateSource("https://bob:hunter2@example.com/a.git"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a source with a password: %v (refused, without repeating the password)", err)
	}
	for src, want := range map[string]bool{"file:///srv/a.git": true, " FILE:///srv/a.git": true, "https://example.com/file:x": false, "file@example.com:a.git": false} {
		if ReadsHostDisk(src) != want {
			t.Errorf("ReadsHostDisk(%q) != %v", src, want)
		}
	}
	s, _ := newService(t)
	notRepo := "file://" + t.TempDir()
	refusal(t, runSteps(s, newJob(t, s, Request{Source: notRepo, AllowUnverified: true})), "not a git repository")
	empty := gitrepo.Bare(t, map[string]string{"README.md": "nothing here\n"})
	refusal(t, runSteps(s, newJob(t, s, Request{Source: empty, AllowUnverified: true})), "no package")
}

// TestFetchPassesTheSSRFPolicy (issue 42 item 1): git's connections go
// through the SSRF policy at dial time. A source on a refused address
// (in any spelling, or a redirect from an allowed host to one) fails
// for good naming the policy and the address, and a trap listening there
// gets no connection; ssh to a host not in allowed_hosts is refused
// before anything runs.
func TestFetchPassesTheSSRFPolicy(t *testing.T) {
	trap, err := ssrftest.Listen("[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	port := trap.Addr().(*net.TCPAddr).Port
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://[::1]:%d%s?%s", port, r.URL.Path, r.URL.RawQuery), http.StatusFound)
	}))
	defer redirect.Close()
	s, _ := newService(t)
	s.SSRF = netguard.Policy{Enabled: true, AllowedHosts: []string{"127.0.0.1"}}
	for src, want := range map[string]string{
		fmt.Sprintf("http://localhost:%d/x.git", port):         "127.0.0.1 (loopback) for host localhost",
		fmt.Sprintf("http://0x7f000002:%d/x.git", port):        "127.0.0.2 (loopback) for host 0x7f000002",
		fmt.Sprintf("https://[::1]:%d/x.git", port):            "::1 (loopback)",
		fmt.Sprintf("http://[::ffff:0:7f00:2]:%d/x.git", port): "carries 127.0.0.2 (loopback)",
		redirect.URL + "/x.git":                                "::1 (loopback)",
		"ssh://git@example.com/x.git":                          "allowed_hosts",
		"git@example.com:x.git":                                "allowed_hosts",
	} {
		// Fetch checks again what Start refused (the policy may change
		// between the two), so the refusal shows on both.
		if err := s.CheckSource(src); err != nil && !strings.Contains(err.Error(), "refused by the SSRF policy (runtime.ssrf)") {
			t.Errorf("Start's check of %s: %v", src, err)
		}
		_, err := s.Fetch(context.Background(), newJob(t, s, Request{Source: src, AllowUnverified: true}))
		var r *RefusedError
		if !errors.As(err, &r) || !strings.Contains(err.Error(), "refused by the SSRF policy (runtime.ssrf)") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal naming the policy and %q", src, err, want)
		}
	}
	if n := trap.Connections(); n != 0 {
		t.Fatalf("the trap got %d connection(s): %v", n, trap.Seen())
	}
	// A literal refused address is 403 before a job.
	if err := s.CheckSource("http://169.254.169.254/x.git"); err == nil || !strings.Contains(err.Error(), "169.254.169.254 (link-local)") {
		t.Fatalf("Start's check: %v", err)
	}
}
