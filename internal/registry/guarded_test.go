package registry

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/netguard/ssrftest"
)

// TestGuardedFetcherRefusesAtDialTime (issue 42): a gateway-side index
// read or pull refuses a refused address when connecting, and a redirect
// from an allowed host to one; the trap gets nothing, the error names
// the policy and the address.
func TestGuardedFetcherRefusesAtDialTime(t *testing.T) {
	trap, err := ssrftest.Listen("[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	port := trap.Addr().(*net.TCPAddr).Port
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://[::1]:"+strconv.Itoa(port)+r.URL.Path, http.StatusFound)
	}))
	defer redirect.Close()
	f := NewGuardedFetcher(netguard.Policy{Enabled: true, AllowedHosts: []string{"127.0.0.1"}})
	ctx := context.Background()
	for base, want := range map[string]string{
		"http://localhost:" + strconv.Itoa(port):  "127.0.0.1 (loopback) for host localhost",
		"http://0x7f000002:" + strconv.Itoa(port): "127.0.0.2 (loopback) for host 0x7f000002",
		"http://[::1]:" + strconv.Itoa(port):      "::1 (loopback)",
		redirect.URL:                              "::1 (loopback)",
	} {
		_, err := f.Index(ctx, Source{ID: "t", Type: TypeAgentry, BaseURL: base})
		if err == nil || !strings.Contains(err.Error(), "refused by the SSRF policy (runtime.ssrf)") || !strings.Contains(err.Error(), want) {
			t.Errorf("index %s: %v, want the policy and %q", base, err, want)
		}
		_, err = f.Download(ctx, &Resolved{Source: Source{ID: "url", Type: "url"}, URL: base + "/p-1.0.0.tar.gz"})
		if err == nil || !strings.Contains(err.Error(), "refused by the SSRF policy") {
			t.Errorf("pull %s: %v", base, err)
		}
	}
	if n := trap.Connections(); n != 0 {
		t.Fatalf("the trap got %d connection(s): %v", n, trap.Seen())
	}
}
