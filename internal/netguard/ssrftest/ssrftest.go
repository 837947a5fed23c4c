// Package ssrftest is the one list of address forms the SSRF tests and
// the black-box probe (make probe) drive every outbound fetch surface
// with, and a trap listener that counts the connections that got through.
//
// The forms reach the trap when the addresses below are on a network
// interface (e2e's SSRF test puts them on lo inside a private network
// namespace, with /etc/hosts naming the .trap.test hosts); outside such a
// namespace most of them lead nowhere, and the trap counts what does.
package ssrftest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Form is one way to spell a refused destination.
type Form struct {
	Name string
	// Host is the URL authority's host (IPv6 in brackets), without port.
	Host string
}

// TrapIPv4 and TrapIPv6 are the addresses the network namespace puts on
// lo besides 127.0.0.0/8 and ::1, so a dial to any form lands on the trap.
var (
	TrapIPv4 = []string{"169.254.169.254", "10.9.9.9", "172.16.9.9", "192.168.9.9", "100.64.9.9"}
	TrapIPv6 = []string{"fd00::9", "fc00::9", "64:ff9b::a9fe:a9fe", "64:ff9b::a09:909", "2002:a9fe:a9fe::1", "2002:a9fe:a9fe::",
		"2002:a09:909::1", "::a9fe:a9fe", "::a09:909", "2001:0:a9fe:a9fe::1", "64:ff9b:1:a9fe:a9:fe00::", "::ffff:0:a9fe:a9fe"}
)

// Hosts are the /etc/hosts lines of the namespace: names that resolve to
// refused addresses (the DNS form of the attack).
var Hosts = map[string]string{
	"metadata.trap.test":  "169.254.169.254",
	"private.trap.test":   "10.9.9.9",
	"v6private.trap.test": "fd00::9",
	"loopback.trap.test":  "127.0.0.3",
	"nat64.trap.test":     "64:ff9b::a9fe:a9fe",
}

// RedirectHost is a name the tests put in allowed_hosts: a server there
// answers every request with a redirect to a refused form, which must be
// refused in turn.
const RedirectHost = "redirect.trap.test"

// RedirectIP is where RedirectHost resolves in the namespace.
const RedirectIP = "127.0.0.9"

// Forms are the direct forms: literal addresses of the refused ranges in
// the spellings URL parsers, curl and inet_aton accept, the IPv6 forms
// that carry an IPv4 address, and names that resolve to refused
// addresses.
func Forms() []Form {
	var out []Form
	add := func(name string, hosts ...string) {
		for _, h := range hosts {
			out = append(out, Form{Name: name, Host: h})
		}
	}
	add("link-local", "169.254.169.254")
	add("private 10/8", "10.9.9.9")
	add("private 172.16/12", "172.16.9.9")
	add("private 192.168/16", "192.168.9.9")
	add("CGNAT 100.64/10", "100.64.9.9")
	add("loopback 127/8", "127.0.0.1", "127.0.0.2", "127.255.255.254")
	add("unspecified", "0.0.0.0", "0")
	add("decimal IPv4", "2852039166", "168364297", "3232237833", "2130706433")
	add("octal IPv4", "0251.0376.0251.0376", "012.011.011.011", "017700000001")
	add("hex IPv4", "0xa9fea9fe", "0xa9.0xfe.0xa9.0xfe", "0x0a090909", "0x7f000001")
	add("short IPv4", "169.254.43518", "169.16689662", "0251.0xfe.43518", "127.1")
	add("IPv6 loopback", "[::1]", "[0:0:0:0:0:0:0:1]")
	add("IPv6 unspecified", "[::]")
	add("IPv6 unique local fc00::/7", "[fd00::9]", "[fc00::9]")
	add("IPv6 link-local", "[fe80::1]")
	add("IPv4-mapped", "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[::ffff:127.0.0.1]", "[::ffff:10.9.9.9]")
	add("IPv4-translated", "[::ffff:0:a9fe:a9fe]")
	add("NAT64", "[64:ff9b::a9fe:a9fe]", "[64:ff9b::169.254.169.254]", "[64:ff9b::a09:909]", "[64:ff9b:1:a9fe:a9:fe00::]")
	add("6to4", "[2002:a9fe:a9fe::1]", "[2002:a9fe:a9fe::]", "[2002:a09:909::1]")
	add("IPv4-compatible", "[::a9fe:a9fe]", "[::169.254.169.254]", "[::127.0.0.1]")
	add("Teredo", "[2001:0:a9fe:a9fe::1]")
	add("localhost", "localhost", "localhost.")
	add("name resolving to a refused address", "metadata.trap.test", "private.trap.test", "v6private.trap.test", "loopback.trap.test", "nat64.trap.test")
	return out
}

// RedirectTargets are the forms RedirectHost redirects to (the redirect
// forms: an allowed host sending the fetch on to a refused one).
func RedirectTargets() []Form {
	return []Form{{"redirect to link-local", "169.254.169.254"}, {"redirect to private", "10.9.9.9"},
		{"redirect to IPv6 loopback", "[::1]"}, {"redirect to hex IPv4", "0xa9fea9fe"},
		{"redirect to NAT64", "[64:ff9b::a9fe:a9fe]"}, {"redirect to a name resolving to link-local", "metadata.trap.test"}}
}

// Count is how many forms the tests drive each surface with.
func Count() int { return len(Forms()) + len(RedirectTargets()) }

// URL is scheme://host[:port]path.
func URL(scheme string, f Form, port int, path string) string {
	h := f.Host
	if port != 0 {
		h += ":" + strconv.Itoa(port)
	}
	return scheme + "://" + h + path
}

// Trap accepts connections on the given addresses and counts them (and
// what was asked, for the failure message). It never answers usefully:
// any connection at all is the failure.
type Trap struct {
	lns   []net.Listener
	n     atomic.Int64
	mu    sync.Mutex
	peers []string
}

// Listen starts a trap on each address ("[::]:80", "0.0.0.0:443", ...).
func Listen(addrs ...string) (*Trap, error) {
	t := &Trap{}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("trap on %s: %w", a, err)
		}
		t.lns = append(t.lns, ln)
		go t.serve(ln)
	}
	return t, nil
}

func (t *Trap) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.n.Add(1)
		buf := make([]byte, 200)
		n, _ := c.Read(buf)
		line, _, _ := strings.Cut(string(buf[:n]), "\n")
		t.mu.Lock()
		t.peers = append(t.peers, fmt.Sprintf("%s on %s: %q", c.RemoteAddr(), c.LocalAddr(), strings.TrimSpace(line)))
		t.mu.Unlock()
		c.Close()
	}
}

// Connections is how many connections reached the trap.
func (t *Trap) Connections() int64 { return t.n.Load() }

// Seen describes each connection (peer, local address, first line).
func (t *Trap) Seen() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.peers...)
}

// Addr is the first listener's address.
func (t *Trap) Addr() net.Addr { return t.lns[0].Addr() }

// Close stops the listeners.
func (t *Trap) Close() {
	for _, ln := range t.lns {
		ln.Close()
	}
}
