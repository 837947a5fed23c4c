package pkginstall

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentryhq/agentry/dev/gitrepo"
)

func TestHostBuildPolicy(t *testing.T) {
	catalog := []string{"https://git.example.com/agents/", "file:///srv/git/triage.git"}
	for _, c := range []struct {
		policy HostBuildPolicy
		source string
		ok     bool
	}{
		{HostBuildPolicy{}, "https://anywhere.example/x.git", true},
		{HostBuildPolicy{Edition: "personal"}, "https://anywhere.example/x.git", true},
		{HostBuildPolicy{Edition: "team"}, "https://git.example.com/agents/a.git", false},
		{HostBuildPolicy{Edition: "scale"}, "https://git.example.com/agents/a.git", false},
		{HostBuildPolicy{Edition: "team", Catalog: catalog}, "https://git.example.com/agents/a.git", true},
		{HostBuildPolicy{Edition: "team", Catalog: catalog}, "file:///srv/git/triage.git", true},
		{HostBuildPolicy{Edition: "team", Catalog: catalog}, "file:///srv/git/triage.git.evil", false},
		{HostBuildPolicy{Edition: "team", Catalog: catalog}, "https://git.example.com/agents-evil/a.git", false},
		{HostBuildPolicy{Catalog: catalog}, "https://anywhere.example/x.git", false},
	} {
		err := c.policy.Allows(c.source)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrHostBuildNotApproved)) {
			t.Errorf("%+v %s: %v, want allowed=%v", c.policy, c.source, err, c.ok)
		}
	}
}

// TestHostBuildRefusedByPolicy: Start refuses a host build the policy does
// not allow (nothing recorded), and the build step checks again, so a job
// accepted before the policy changed builds nothing.
func TestHostBuildRefusedByPolicy(t *testing.T) {
	s, agents := newService(t)
	url := gitrepo.Bare(t, map[string]string{"agent.yaml": sourceAgent, "agentry-build.sh": "touch built\n"})
	s.HostBuilds = HostBuildPolicy{Edition: "team"}
	if _, err := s.Start(t.Context(), Request{Source: url, AllowUnverified: true, AllowHostBuild: true}); !errors.Is(err, ErrHostBuildNotApproved) {
		t.Fatalf("start: %v", err)
	}
	if jobs, _ := s.List(t.Context(), 10); len(jobs) != 0 {
		t.Fatalf("a refused job was recorded: %+v", jobs)
	}
	id := newJob(t, s, Request{Source: url, AllowUnverified: true, AllowHostBuild: true})
	refusal(t, runSteps(s, id), "host_build_catalog")
	if entries, _ := os.ReadDir(agents); len(entries) != 0 {
		t.Fatalf("installed without an approved build: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(s.checkoutDir(id), "built")); !os.IsNotExist(err) {
		t.Fatal("the build script ran")
	}
	s.HostBuilds.Catalog = []string{url}
	if err := runSteps(s, newJob(t, s, Request{Source: url, AllowUnverified: true, AllowHostBuild: true})); err != nil {
		t.Fatal(err)
	}
}
