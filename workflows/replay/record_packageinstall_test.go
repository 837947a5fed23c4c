package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/gitrepo"
	"github.com/agentryhq/agentry/workflows"
)

// TestRecordPackageInstall records a PackageInstall job from a local git
// repository holding raw agent source with a build script (fetch, verify,
// build, install). It runs only with -update (make replay-record).
func TestRecordPackageInstall(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	url := gitrepo.Bare(t, map[string]string{
		"agent.yaml":       "id: recorded\ndescription: Installed by the replay recording\n",
		"agentry-build.sh": "mkdir -p prompts && echo built > prompts/built.md\n",
	})
	g := gatewaytest.Start(t, gatewaytest.Options{})
	r := g.Do("POST", "/api/v1/package-installs", map[string]any{"source": url, "allow_unverified": true, "allow_host_build": true})
	if r.Status != 202 {
		t.Fatalf("package install: %d %s", r.Status, r.Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wid := workflows.PackageInstallWorkflowID(r.JSON["id"].(string))
	var res workflows.PackageInstallResult
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &res); err != nil || res.Status != "succeeded" {
		t.Fatalf("package install job: %+v %v", res, err)
	}
	record(ctx, t, g.Temporal, wid, "PackageInstall-build-and-install.json")
}
