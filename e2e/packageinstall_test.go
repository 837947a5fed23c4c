package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/gitrepo"
)

// TestPackageInstallJobSurvivesGatewayCrash: agentry package install from
// a local bare git repository whose build script takes a while; the
// gateway is SIGKILLed in the middle of the build and started again on the
// same workspace. The client, still waiting, shows the job finish; the job
// fetched once, built again only the interrupted build, and installed the
// agent once.
func TestPackageInstallJobSurvivesGatewayCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	bin := binaries(t)
	marks := filepath.Join(t.TempDir(), "builds")
	url := gitrepo.Bare(t, map[string]string{
		"agent.yaml": "id: crashproof\ndescription: Installed across a crash\n",
		// Each run appends a line to marks, then takes a few seconds.
		"agentry-build.sh": fmt.Sprintf("echo build >> %q\nsleep 3\nmkdir -p prompts\necho built > prompts/built.md\n", marks),
	})

	ws := t.TempDir()
	ports := gatewaytest.FreePorts(t, 2)
	const key = "package-install-key-0123456789"
	env := map[string]string{
		"AGENTRY_WORKSPACE":                       ws,
		"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
		"AGENTRY_SERVER_API_KEY":                  key,
		"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
		"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":    "false",
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	first := gatewaytest.StartProcess(t, filepath.Join(bin, "agentryd"), env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, first)

	// Bad input first: refused by the gateway, nothing recorded.
	h := newHome(t)
	r := h.run("--gateway", base, "--api-key", key, "package", "install", "ftp://example.com/x.git")
	expectCode(t, r, 1, "not a git URL")
	expectContains(t, r.Stderr, "ftp://example.com/x.git", "names the cause")

	client := exec.Command(h.bin, "--gateway", base, "--api-key", key, "--json",
		"package", "install", url, "--allow-unverified", "--allow-host-build")
	client.Env = h.environ(nil)
	var out, progress bytes.Buffer
	client.Stdout, client.Stderr = &out, &progress
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	defer client.Process.Kill()

	waitFor(t, 60*time.Second, "the build to start", func() bool { return countLines(marks) >= 1 })
	first.Kill(t)
	t.Log("killed the gateway in the middle of the build")

	second := gatewaytest.StartProcess(t, filepath.Join(bin, "agentryd"), env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, second)
	done := make(chan error, 1)
	go func() { done <- client.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("client: %v\n%s\n%s\n%s", err, out.String(), progress.String(), second.Output)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the client did not see the job finish\n%s\n%s", progress.String(), second.Output)
	}

	var job struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		AgentID  string `json:"agent_id"`
		Progress []struct{ Step, Message string }
	}
	if err := json.Unmarshal(out.Bytes(), &job); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	if job.Status != "succeeded" || job.AgentID != "crashproof" || !strings.HasPrefix(job.ID, "pkginstall-") {
		t.Fatalf("job %+v", job)
	}
	count := func(step, prefix string) int {
		n := 0
		for _, p := range job.Progress {
			if p.Step == step && strings.HasPrefix(p.Message, prefix) {
				n++
			}
		}
		return n
	}
	if count("fetch", "fetched ") != 1 || count("install", "installed agent crashproof") != 1 || count("build", "agentry-build.sh finished") != 1 {
		t.Fatalf("steps not exactly once: %+v", job.Progress)
	}
	if n := countLines(marks); n != 2 {
		t.Fatalf("the build ran %d times, want 2 (the interrupted run and its rerun)", n)
	}
	for _, want := range []string{"fetched " + url, "raw source approved", "installed agent crashproof"} {
		expectContains(t, progress.String(), want, "progress shown live")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "agents", "crashproof", "prompts", "built.md")); err != nil || string(b) != "built\n" {
		t.Fatalf("installed bundle: %v %q", err, b)
	}
	// The job and its workflow share the id: the status command finds it.
	r = h.run("--gateway", base, "--api-key", key, "package", "status", job.ID)
	expectCode(t, r, 0, "package status")
	expectContains(t, r.Stdout, "succeeded", "status")
	second.Cmd.Process.Signal(syscall.SIGTERM)
	second.Cmd.Wait()
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
