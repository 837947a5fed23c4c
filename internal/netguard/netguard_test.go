package netguard

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheckIP(t *testing.T) {
	strict := Policy{Enabled: true}
	cases := map[string]bool{ // ip -> allowed under the strict policy
		"8.8.8.8": true, "2606:4700::1111": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"100.64.0.1": false, "169.254.169.254": false, "0.0.0.0": false, "224.0.0.1": false, "fd00::1": false, "fe80::1": false,
	}
	for ip, want := range cases {
		err := strict.checkIP(ip, net.ParseIP(ip))
		if (err == nil) != want {
			t.Errorf("%s: err=%v, want allowed=%v", ip, err, want)
		}
		if err != nil && !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: error should wrap ErrBlocked", ip)
		}
	}
	if err := (Policy{Enabled: true, AllowLoopback: true}).checkIP("127.0.0.1", net.ParseIP("127.0.0.1")); err != nil {
		t.Error("allow_loopback")
	}
	if err := (Policy{Enabled: true, AllowPrivate: true}).checkIP("10.0.0.1", net.ParseIP("10.0.0.1")); err != nil {
		t.Error("allow_private")
	}
	if err := (Policy{Enabled: true, AllowPrivate: true}).checkIP("169.254.169.254", net.ParseIP("169.254.169.254")); err == nil {
		t.Error("metadata address must stay blocked even with allow_private")
	}
	if err := (Policy{Enabled: true, AllowedHosts: []string{"10.9.9.9"}}).checkIP("10.9.9.9", net.ParseIP("10.9.9.9")); err != nil {
		t.Error("allowed_hosts")
	}
	if err := (Policy{}).checkIP("127.0.0.1", net.ParseIP("127.0.0.1")); err != nil {
		t.Error("disabled policy blocks")
	}
}

func TestCheckURL(t *testing.T) {
	p := Policy{Enabled: true}
	for _, bad := range []string{"file:///etc/passwd", "gopher://x", "ftp://example.com", "http://127.0.0.1/", "http://[::1]:80/", "http://localhost:8080/", "not a url", "/relative"} {
		if _, err := p.CheckURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"https://example.com/hook", "http://93.184.216.34/x"} {
		if _, err := p.CheckURL(good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}

// TestClientRefusesAtDialTime: a name that resolves to loopback is refused
// when connecting, and so is a redirect to a blocked address.
func TestClientRefusesAtDialTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	c := Policy{Enabled: true}.Client(2 * time.Second)
	// The client does not pre-check the URL: the refusal comes from the
	// dialer, which sees the resolved address.
	if _, err := c.Get(srv.URL); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("dial-time check: %v", err)
	}
	open := Policy{Enabled: true, AllowLoopback: true}.Client(2 * time.Second)
	resp, err := open.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// IPv6 forms that carry an IPv4 address are judged by it (issue 18 item 7):
// both in URLs (literal) and at dial time.
func TestEmbeddedIPv4IsClassified(t *testing.T) {
	strict := Policy{Enabled: true}
	for _, ip := range []string{
		"::127.0.0.1", "::a9fe:a9fe", "::ffff:127.0.0.1", "::ffff:a9fe:a9fe", // IPv4-compatible, -mapped
		"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "64:ff9b::10.0.0.1", // NAT64 /96
		"64:ff9b:1:a9fe:a9:fe00::", "64:ff9b:1:7f00:0:100::", // NAT64 /48 (RFC 6052 layout)
		"2002:a9fe:a9fe::", "2002:7f00:1::1", "2002:0a00:0001::", // 6to4
		"2001:0:4136:e378:8000:63bf:5601:fefe", // Teredo: client 169.254.1.1 obfuscated
		"2001:0:7f00:1::1",                     // Teredo: server 127.0.0.1
	} {
		err := strict.checkIP(ip, net.ParseIP(ip))
		if err == nil || !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: err=%v, want blocked", ip, err)
		}
		if _, err := strict.CheckURL("http://[" + ip + "]/"); err == nil {
			t.Errorf("URL with %s accepted", ip)
		}
	}
	for _, ip := range []string{"64:ff9b::808:808", "2002:808:808::", "::1:0:0:1"} {
		if err := strict.checkIP(ip, net.ParseIP(ip)); err != nil {
			t.Errorf("%s (public IPv4 inside) refused: %v", ip, err)
		}
	}
}
