package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/netguard/ssrftest"
)

// The one list of forms has the 60 the probe drives (issue 42).
func TestFormsListSize(t *testing.T) {
	if n := ssrftest.Count(); n != 60 {
		t.Fatalf("%d forms, want 60", n)
	}
}

// Every direct form is refused by the strict policy: literal addresses
// (loose IPv4 spellings included) before any dial, names by the dial-time
// check when they resolve to a refused address.
func TestEveryFormIsRefused(t *testing.T) {
	strict := netguard.Policy{Enabled: true}
	for _, f := range ssrftest.Forms() {
		host := strings.Trim(f.Host, "[]")
		if _, isName := ssrftest.Hosts[host]; isName {
			continue // resolves only inside the test's network namespace (e2e)
		}
		err := strict.CheckHost(host)
		if err == nil || !errors.Is(err, netguard.ErrBlocked) {
			t.Errorf("%s %s: %v, want refused", f.Name, f.Host, err)
			continue
		}
		if !strings.Contains(err.Error(), "refused by the SSRF policy (runtime.ssrf)") {
			t.Errorf("%s: the refusal does not name the policy: %v", f.Host, err)
		}
		if _, err := strict.CheckURL(ssrftest.URL("https", f, 443, "/x.git")); err == nil {
			t.Errorf("URL with %s accepted", f.Host)
		}
	}
}

// Loose IPv4 spellings read as inet_aton reads them.
func TestParseIPLooseForms(t *testing.T) {
	for in, want := range map[string]string{
		"2852039166": "169.254.169.254", "0251.0376.0251.0376": "169.254.169.254", "0xa9fea9fe": "169.254.169.254",
		"0xa9.0xfe.0xa9.0xfe": "169.254.169.254", "169.254.43518": "169.254.169.254", "169.16689662": "169.254.169.254",
		"0251.0xfe.43518": "169.254.169.254", "168364297": "10.9.9.9", "012.011.011.011": "10.9.9.9", "0x0a090909": "10.9.9.9",
		"3232237833": "192.168.9.9", "127.1": "127.0.0.1", "017700000001": "127.0.0.1", "0": "0.0.0.0", "[::1]": "::1",
	} {
		if got := netguard.ParseIP(in); got == nil || got.String() != want {
			t.Errorf("ParseIP(%q) = %v, want %s", in, got, want)
		}
	}
	for _, notIP := range []string{"example.com", "1.2.3.4.5", "256.1.1.1", "0x1g", "08.1.1.1", "4294967296", "", "1..2"} {
		if got := netguard.ParseIP(notIP); got != nil {
			t.Errorf("ParseIP(%q) = %v, want nil", notIP, got)
		}
	}
}

// The refusal says which policy and which address, and for which host.
func TestRefusalNamesPolicyAndAddress(t *testing.T) {
	err := netguard.Policy{Enabled: true}.CheckHost("0xa9fea9fe")
	want := "refused by the SSRF policy (runtime.ssrf): 169.254.169.254 (link-local) for host 0xa9fea9fe"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	err = netguard.Policy{Enabled: true}.CheckHost("64:ff9b::a9fe:a9fe")
	if err == nil || !strings.Contains(err.Error(), "64:ff9b::a9fe:a9fe, which carries 169.254.169.254 (link-local)") {
		t.Fatalf("NAT64: %v", err)
	}
}

// proxyClient is an HTTP client that goes through the proxy for
// everything and follows no redirects itself (as git's proxy use).
func proxyClient(px *netguard.Proxy) *http.Client {
	u, _ := url.Parse(px.URL())
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
}

// Every form asked of the proxy, as plain HTTP and through CONNECT, is
// refused at dial time; a trap listening on every loopback address of the
// port gets no connection (the forms that spell loopback would reach it).
func TestProxyRefusesEveryFormAtDialTime(t *testing.T) {
	trap, err := ssrftest.Listen("[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	port := trap.Addr().(*net.TCPAddr).Port
	px, err := netguard.Policy{Enabled: true}.StartProxy(true)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	c := proxyClient(px)
	for _, f := range ssrftest.Forms() {
		for _, scheme := range []string{"http", "https"} {
			u := ssrftest.URL(scheme, f, port, "/x.git/info/refs")
			resp, err := c.Get(u)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadGateway {
					t.Errorf("%s: HTTP %d through the proxy", u, resp.StatusCode)
				}
			}
		}
	}
	if n := trap.Connections(); n != 0 {
		t.Fatalf("the trap got %d connection(s): %v", n, trap.Seen())
	}
	if err := px.Refusal(); err == nil || !errors.Is(err, netguard.ErrBlocked) {
		t.Fatalf("proxy refusal: %v", err)
	}
	// The trap does count: with the policy off, the loopback forms reach it.
	open, err := netguard.Policy{}.StartProxy(true)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	for _, host := range []string{"127.0.0.1", "[::1]", "0x7f000001", "[::ffff:127.0.0.1]"} {
		if resp, err := proxyClient(open).Get(ssrftest.URL("http", ssrftest.Form{Host: host}, port, "/")); err == nil {
			resp.Body.Close()
		}
	}
	if n := trap.Connections(); n != 4 {
		t.Fatalf("with the policy off the trap got %d connection(s), want 4: %v", n, trap.Seen())
	}
}

// The proxy lets an allowed destination through (both ways), and a
// redirect from an allowed host to a refused address is refused when
// the client follows it through the proxy.
func TestProxyAllowsAndChecksRedirects(t *testing.T) {
	trap, err := ssrftest.Listen("[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	port := trap.Addr().(*net.TCPAddr).Port
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/go" {
			http.Redirect(w, r, ssrftest.URL("http", ssrftest.Form{Host: "[::1]"}, port, "/x"), http.StatusFound)
			return
		}
		w.Write([]byte("fine"))
	}))
	defer srv.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("tls fine")) }))
	defer tls.Close()

	px, err := netguard.Policy{Enabled: true, AllowedHosts: []string{"127.0.0.1"}}.StartProxy(true)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	u, _ := url.Parse(px.URL())
	tr := tls.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(u)
	c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	for _, target := range []string{srv.URL + "/", tls.URL + "/"} {
		resp, err := c.Get(target)
		if err != nil {
			t.Fatalf("%s through the proxy: %v", target, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d", target, resp.StatusCode)
		}
	}
	resp, err := c.Get(srv.URL + "/go")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("redirect to [::1]: HTTP %d, want 403", resp.StatusCode)
		}
	}
	if trap.Connections() != 0 {
		t.Fatalf("the redirect reached the trap: %v", trap.Seen())
	}
	if err := px.Refusal(); err == nil || !strings.Contains(err.Error(), "::1 (loopback)") {
		t.Fatalf("refusal: %v", err)
	}
}

// gitServer serves a bare repository over smart HTTP (git http-backend
// behind net/http/cgi) and returns the repository's URL and a count of
// the requests it got.
func gitServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(work, 0o755)
	run(work, "init", "--quiet", "--initial-branch=main")
	os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644)
	run(work, "add", "README")
	run(work, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "-m", "x")
	run(root, "clone", "--quiet", "--bare", work, filepath.Join(root, "repo.git"))
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git", &hits
}

// Real git through netguard.Git: a clone from an allowed loopback server
// works through the proxy; with loopback refused the same clone fails,
// the proxy's refusal names policy and address, and git never reached
// the server. A proxy or NO_PROXY in the gateway's environment changes
// nothing (git gets an environment of its own).
func TestGitThroughProxy(t *testing.T) {
	repo, hits := gitServer(t)
	t.Setenv("NO_PROXY", "*")
	t.Setenv("no_proxy", "*")
	t.Setenv("http_proxy", "")
	ctx := context.Background()
	clone := func(p netguard.Policy) (string, *netguard.Proxy, error) {
		dest := filepath.Join(t.TempDir(), "c")
		cmd, px, done, err := netguard.Git{Policy: p, AllowHTTP: true}.Command(ctx, "", "clone", "--quiet", "--depth", "1", "--", repo, dest)
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		out, err := cmd.CombinedOutput()
		return dest, px, errors.Join(err, errorIf(err != nil, string(out)))
	}
	dest, _, err := clone(netguard.Policy{Enabled: true, AllowLoopback: true})
	if err != nil {
		t.Fatalf("clone through the proxy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dest, "README")); err != nil || hits.Load() == 0 {
		t.Fatalf("clone without README (%v) or without reaching the server (%d)", err, hits.Load())
	}
	before := hits.Load()
	_, px, err := clone(netguard.Policy{Enabled: true})
	if err == nil {
		t.Fatal("clone from a loopback address succeeded under the strict policy")
	}
	if hits.Load() != before {
		t.Fatalf("git reached the server (%d requests) though the policy refuses it", hits.Load()-before)
	}
	if r := px.Refusal(); r == nil || !strings.Contains(r.Error(), "refused by the SSRF policy (runtime.ssrf): 127.0.0.1 (loopback)") {
		t.Fatalf("refusal: %v", r)
	}
}

func errorIf(cond bool, msg string) error {
	if cond {
		return errors.New(msg)
	}
	return nil
}

// Sources the proxy cannot guard are refused before anything runs: ssh
// and git:// (they dial themselves) unless the host is allowed by name,
// file:// unless the caller allows it, literal refused addresses.
func TestGitCheckSource(t *testing.T) {
	g := netguard.Git{Policy: netguard.Policy{Enabled: true, AllowedHosts: []string{"git.internal"}}, AllowHTTP: true}
	for _, bad := range []string{"ssh://git@example.com/a.git", "git@example.com:a/b.git", "git://example.com/a.git",
		"file:///srv/a.git", "/srv/a.git", "http://169.254.169.254/x.git", "https://[64:ff9b::a9fe:a9fe]/x.git",
		"https://0xa9fea9fe/x.git", "https://localhost/x.git", "ftp://example.com/x.git", "ext::sh -c id",
		"git@example.com:/abs/a.git", "example.com:a.git", "[::1]:a.git"} {
		err := g.CheckSource(bad)
		if err == nil {
			t.Errorf("%s accepted", bad)
		} else if !strings.Contains(err.Error(), "SSRF policy") && !strings.Contains(err.Error(), "not allowed") && !strings.Contains(err.Error(), "only https") {
			t.Errorf("%s: %v does not say why", bad, err)
		}
	}
	for _, good := range []string{"https://example.com/a.git", "http://example.com/a.git", "ssh://git@git.internal/a.git", "git@git.internal:a/b.git"} {
		if err := g.CheckSource(good); err != nil {
			t.Errorf("%s refused: %v", good, err)
		}
	}
	if err := (netguard.Git{Policy: netguard.Policy{Enabled: true}, AllowFile: true}).CheckSource("file:///srv/a.git"); err != nil {
		t.Errorf("file:// with AllowFile: %v", err)
	}
}
