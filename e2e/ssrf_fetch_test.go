package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/netguard/ssrftest"
	"github.com/agentryhq/agentry/internal/registry"
)

// ssrfNetnsEnv marks the test binary re-run inside its private network
// namespace.
const ssrfNetnsEnv = "AGENTRY_SSRF_NETNS"

// TestSSRFEveryFetchSurface (issue 42 item 1) drives every outbound fetch
// the gateway makes on a user's behalf with the 60 address forms of
// ssrftest against a trap listener, and asserts the trap got no
// connection at all:
//
//   - package installs (POST /package-installs, http:// and https:// git
//     sources): a 403 before a job, or a failed job naming the policy;
//   - skill installs (POST /skills/install, https:// git sources): 403;
//   - registry index reads and pulls (registry.NewGuardedFetcher, the
//     fetcher for gateway-side use): an error naming the policy.
//
// The trap must be reachable for the test to mean anything, so the test
// re-runs itself in a fresh network namespace (unshare --net --mount, as
// root) where the forms' addresses (169.254.169.254, 10.9.9.9, NAT64,
// 6to4, ... see ssrftest.TrapIPv4/TrapIPv6) sit on lo, /etc/hosts names
// the .trap.test hosts, and the trap listens on ports 80 and 443 of every
// address: any dial the policy lets through lands on it (checked first).
func TestSSRFEveryFetchSurface(t *testing.T) {
	if os.Getenv(ssrfNetnsEnv) == "" {
		runInTrapNetns(t)
		return
	}
	trap, err := ssrftest.Listen("[::]:80", "[::]:443")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	// The trap is reachable on the forms' addresses: a plain dial lands.
	for _, a := range []string{"169.254.169.254:80", "10.9.9.9:443", "[64:ff9b::a9fe:a9fe]:80", "[::a9fe:a9fe]:443", "metadata.trap.test:80"} {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			t.Fatalf("the trap is not reachable on %s: %v", a, err)
		}
		c.Close()
	}
	waitFor(t, 5*time.Second, "the trap to count the reachability dials", func() bool { return trap.Connections() == 5 })
	baseline := trap.Connections()

	// An allowed host that redirects every request to a refused form.
	var redirected atomic.Int64
	targets := ssrftest.RedirectTargets()
	redirector := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /r/<n>/rest -> http://<target n>/rest
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/r/"), "/", 2)
		n, err := strconv.Atoi(parts[0])
		if err != nil || n >= len(targets) || len(parts) < 2 {
			http.NotFound(w, r)
			return
		}
		redirected.Add(1)
		to := ssrftest.URL("http", targets[n], 0, "/"+parts[1])
		if r.URL.RawQuery != "" {
			to += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, to, http.StatusFound)
	})}
	rln, err := net.Listen("tcp", ssrftest.RedirectIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	go redirector.Serve(rln)
	defer redirector.Close()
	redirectURL := func(n int, rest string) string {
		return fmt.Sprintf("http://%s:8080/r/%d%s", ssrftest.RedirectHost, n, rest)
	}

	g := gatewaytest.Start(t, gatewaytest.Options{Config: fmt.Sprintf("runtime: {ssrf: {enabled: true, allowed_hosts: [%q]}}\n", ssrftest.RedirectHost)})
	forms := ssrftest.Forms()
	refusedBy := "refused by the SSRF policy (runtime.ssrf)"

	// Package installs: every form over http and https, and the redirects.
	var sources []string
	for _, f := range forms {
		sources = append(sources, ssrftest.URL("http", f, 0, "/x.git"), ssrftest.URL("https", f, 0, "/x.git"))
	}
	for i := range targets {
		sources = append(sources, redirectURL(i, "/x.git"))
	}
	const jobs = "/api/v1/package-installs"
	pending := map[string]string{} // job id -> source
	for _, src := range sources {
		r := g.Do("POST", jobs, map[string]any{"source": src, "allow_unverified": true})
		switch msg, _ := r.JSON["error"].(string); {
		case r.Status == 403 && strings.Contains(msg, refusedBy):
		case r.Status == 202:
			pending[r.JSON["id"].(string)] = src
		default:
			t.Errorf("package install %s: %d %.300s", src, r.Status, r.Raw)
		}
	}
	t.Logf("package installs: %d refused before a job, %d jobs", len(sources)-len(pending), len(pending))
	waitFor(t, 3*time.Minute, "every package install job to end", func() bool {
		for id := range pending {
			if r := g.Do("GET", jobs+"/"+id, nil); r.JSON["status"] != "failed" && r.JSON["status"] != "succeeded" {
				return false
			}
		}
		return true
	})
	for id, src := range pending {
		r := g.Do("GET", jobs+"/"+id, nil)
		if msg, _ := r.JSON["error"].(string); r.JSON["status"] != "failed" || !strings.Contains(msg, refusedBy) {
			t.Errorf("package install job for %s: %s %q, want failed by the policy", src, r.JSON["status"], msg)
		}
	}
	if redirected.Load() == 0 {
		t.Error("no package install followed the redirector: the redirect forms were not exercised")
	}

	// Skill installs: https git sources only.
	for _, f := range forms {
		src := ssrftest.URL("https", f, 0, "/x.git")
		r := g.Do("POST", "/api/v1/skills/install", map[string]any{"source": src})
		if msg, _ := r.JSON["error"].(string); r.Status != 403 || !strings.Contains(msg, refusedBy) {
			t.Errorf("skill install %s: %d %.300s", src, r.Status, r.Raw)
		}
	}

	// Registry index reads and pulls through the guarded fetcher.
	f := registry.NewGuardedFetcher(netguard.Policy{Enabled: true, AllowedHosts: []string{ssrftest.RedirectHost}})
	ctx := context.Background()
	var bases []string
	for _, form := range forms {
		bases = append(bases, ssrftest.URL("http", form, 0, ""), ssrftest.URL("https", form, 0, ""))
	}
	for i := range targets {
		bases = append(bases, redirectURL(i, ""))
	}
	before := redirected.Load()
	for _, base := range bases {
		src := registry.Source{ID: "trap", Type: registry.TypeAgentry, BaseURL: base}
		if _, err := f.Index(ctx, src); err == nil || !strings.Contains(err.Error(), refusedBy) {
			t.Errorf("registry index %s: %v", base, err)
		}
		ref, err := registry.ParseRef(base+"/pkg-1.0.0.tar.gz", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Resolve(ctx, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Download(ctx, res); err == nil || !strings.Contains(err.Error(), refusedBy) {
			t.Errorf("pull %s: %v", res.URL, err)
		}
	}
	if redirected.Load() == before {
		t.Error("no registry fetch followed the redirector")
	}

	if n := trap.Connections() - baseline; n != 0 {
		t.Fatalf("the trap got %d connection(s) through the fetch surfaces:\n%s", n, strings.Join(trap.Seen()[baseline:], "\n"))
	}
	t.Logf("%d forms x (package install http+https, skill install, registry index, pull): the trap got no connection", ssrftest.Count())
}

// runInTrapNetns re-runs TestSSRFEveryFetchSurface in a private network
// and mount namespace prepared for the trap.
func runInTrapNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway in a network namespace")
	}
	if err := exec.Command("unshare", "--net", "--mount", "true").Run(); err != nil {
		t.Skipf("needs unshare --net --mount (root): %v", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	hosts := "127.0.0.1 localhost\n::1 localhost\n" + ssrftest.RedirectIP + " " + ssrftest.RedirectHost + "\n"
	for name, ip := range ssrftest.Hosts {
		hosts += ip + " " + name + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "set -e\nip link set lo up\n"
	for _, a := range ssrftest.TrapIPv4 {
		script += "ip addr add " + a + "/32 dev lo\n"
	}
	for _, a := range ssrftest.TrapIPv6 {
		script += "ip -6 addr add " + a + "/128 dev lo\n"
	}
	script += "mount --bind " + filepath.Join(dir, "hosts") + " /etc/hosts\nexec \"$@\"\n"
	cmd := exec.Command("unshare", "--net", "--mount", "--", "sh", "-c", script, "sh",
		os.Args[0], "-test.run", "^TestSSRFEveryFetchSurface$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), ssrfNetnsEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("inside the network namespace:\n%s", out.String())
	if err != nil {
		t.Fatalf("the SSRF test in the network namespace failed: %v", err)
	}
	if !strings.Contains(out.String(), "--- PASS: TestSSRFEveryFetchSurface") {
		t.Fatal("the SSRF test did not pass inside the network namespace")
	}
}
