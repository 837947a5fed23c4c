// Package netguard is the SSRF policy for outbound HTTP made on someone
// else's behalf (agent tools, webhook deliveries): by default loopback,
// private, link-local, multicast and unspecified addresses are refused.
// The check runs on the resolved IP at dial time, so DNS tricks (a public
// name resolving to 127.0.0.1, rebinding between check and use) do not
// get through.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Policy says which destinations are allowed.
type Policy struct {
	// Enabled turns the guard on; off allows everything.
	Enabled       bool
	AllowLoopback bool
	AllowPrivate  bool
	// AllowedHosts are host names or IPs always allowed (e.g. an internal
	// service a team trusts).
	AllowedHosts []string
}

// ErrBlocked is what every refusal wraps (errors.Is).
var ErrBlocked = errors.New("destination not allowed by the SSRF policy")

// PolicyName is the configuration key of the policy; refusals name it so
// an operator knows what to change.
const PolicyName = "runtime.ssrf"

// BlockedError is a refusal: which address, why, and for which host.
type BlockedError struct {
	Host   string // as asked for (a name, or the address itself)
	IP     net.IP // the address refused
	Reason string // loopback, private range, link-local, ...
	// Embedded is the IPv4 address an IPv6 form carries, when that is
	// what was refused.
	Embedded net.IP
}

func (e *BlockedError) Error() string {
	if e.IP == nil {
		return "refused by the SSRF policy (" + PolicyName + "): host " + e.Host + ": " + e.Reason
	}
	what := e.IP.String() + " (" + e.Reason + ")"
	if e.Embedded != nil {
		what = e.IP.String() + ", which carries " + e.Embedded.String() + " (" + e.Reason + ")"
	}
	host := ""
	if e.Host != "" && e.Host != e.IP.String() {
		host = " for host " + e.Host
	}
	return "refused by the SSRF policy (" + PolicyName + "): " + what + host + ": destination not allowed"
}

// Is makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// CheckURL validates scheme and, for literal IPs (in any spelling git or
// curl would read as one: 2852039166, 0251.0376.0251.0376, 0xa9fea9fe) or
// localhost, the address. Names are checked again at dial time.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: only http and https URLs are allowed", raw)
	}
	if err := p.CheckHost(u.Hostname()); err != nil {
		return nil, err
	}
	return u, nil
}

// CheckHost judges a host name or literal address without resolving it:
// literal addresses (loose IPv4 spellings included) and localhost are
// refused here; other names are judged at dial time.
func (p Policy) CheckHost(host string) error {
	if ip := ParseIP(host); ip != nil {
		return p.checkIP(host, ip)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if p.Enabled && !p.hostAllowed(host) && !p.AllowLoopback && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
		return &BlockedError{Host: host, IP: net.IPv4(127, 0, 0, 1), Reason: "loopback"}
	}
	return nil
}

// ParseIP reads an address as git, curl and inet_aton do: IPv6 (brackets
// allowed) and IPv4 in dotted, decimal, octal or hex parts (127.1,
// 2852039166, 0251.0376.0251.0376, 0xa9fea9fe). Anything else is nil.
func ParseIP(host string) net.IP {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if i := strings.IndexByte(host, '%'); i >= 0 { // zone (fe80::1%eth0)
		host = host[:i]
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip
	}
	return parseLooseIPv4(host)
}

// parseLooseIPv4 is inet_aton: one to four parts, each decimal, octal
// (leading 0) or hex (0x), the last filling the remaining bytes.
func parseLooseIPv4(s string) net.IP {
	parts := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(parts) == 0 || len(parts) > 4 {
		return nil
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		v, ok := parseLoosePart(part)
		if !ok {
			return nil
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return nil
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return nil
	}
	n |= last
	return net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func parseLoosePart(s string) (uint64, bool) {
	base := uint64(10)
	switch {
	case s == "":
		return 0, false
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var v uint64
	for _, c := range strings.ToLower(s) {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func (p Policy) hostAllowed(host string) bool {
	return slices.ContainsFunc(p.AllowedHosts, func(h string) bool { return strings.EqualFold(h, host) })
}

func (p Policy) checkIP(host string, ip net.IP) error {
	if !p.Enabled || p.hostAllowed(host) || p.hostAllowed(ip.String()) {
		return nil
	}
	if reason := p.classify(ip); reason != "" {
		return &BlockedError{Host: host, IP: ip, Reason: reason}
	}
	// An IPv6 address that carries an IPv4 address (IPv4-compatible,
	// IPv4-translated, NAT64, 6to4, Teredo) reaches that IPv4 host through
	// a translator or tunnel: it is judged by the embedded address too.
	for _, v4 := range EmbeddedIPv4(ip) {
		if reason := p.classify(v4); reason != "" {
			return &BlockedError{Host: host, IP: ip, Reason: reason, Embedded: v4}
		}
	}
	return nil
}

var (
	nat64      = mustCIDR("64:ff9b::/96")
	nat64Local = mustCIDR("64:ff9b:1::/48")
	sixToFour  = mustCIDR("2002::/16")
	teredo     = mustCIDR("2001::/32")
	// translated is SIIT's IPv4-translated form (RFC 2765, ::ffff:0:a.b.c.d).
	translated = mustCIDR("::ffff:0:0:0/96")
)

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// EmbeddedIPv4 returns the IPv4 addresses an IPv6 address carries:
// IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96, and 64:ff9b:1::/48 per
// RFC 6052's /48 layout), IPv4-translated (::ffff:0:a.b.c.d), 6to4 (2002:aabb:ccdd::/48) and Teredo (server and
// obfuscated client). IPv4-mapped addresses (::ffff:a.b.c.d) are IPv4
// already (net.IP treats them so) and return nothing here.
func EmbeddedIPv4(ip net.IP) []net.IP {
	if ip.To4() != nil || len(ip) != net.IPv6len {
		return nil
	}
	var out []net.IP
	zero12 := true
	for _, b := range ip[:12] {
		if b != 0 {
			zero12 = false
			break
		}
	}
	switch {
	case zero12:
		if !ip.Equal(net.IPv6unspecified) && !ip.Equal(net.IPv6loopback) {
			out = append(out, net.IPv4(ip[12], ip[13], ip[14], ip[15]))
		}
	case nat64.Contains(ip), translated.Contains(ip):
		out = append(out, net.IPv4(ip[12], ip[13], ip[14], ip[15]))
	case nat64Local.Contains(ip):
		out = append(out, net.IPv4(ip[6], ip[7], ip[9], ip[10]))
	case sixToFour.Contains(ip):
		out = append(out, net.IPv4(ip[2], ip[3], ip[4], ip[5]))
	case teredo.Contains(ip):
		out = append(out, net.IPv4(ip[4], ip[5], ip[6], ip[7]),
			net.IPv4(ip[12]^0xff, ip[13]^0xff, ip[14]^0xff, ip[15]^0xff))
	}
	return out
}

// classify names why ip's own range is refused ("" when it is not).
func (p Policy) classify(ip net.IP) string {
	switch {
	case ip.IsLoopback():
		if !p.AllowLoopback {
			return "loopback"
		}
	case ip.IsPrivate(), isCGNAT(ip):
		if !p.AllowPrivate {
			return "private range"
		}
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsLinkLocalMulticast(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	return ""
}

var cgnat = &net.IPNet{IP: net.IPv4(100, 64, 0, 0), Mask: net.CIDRMask(10, 32)}

func isCGNAT(ip net.IP) bool { return cgnat.Contains(ip) }

// Dialer returns a dialer that refuses blocked addresses after resolution.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: timeout,
		Control: func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil {
				return fmt.Errorf("%s: unresolved address", host)
			}
			return p.checkIP(host, ip)
		},
	}
}

// DialContext connects to addr (host:port) if the policy allows every
// address it is about to use: the check runs on the resolved IP in the
// dialer's Control hook, so a name that resolves (or rebinds) to a blocked
// address is refused at the moment of connecting. Hosts in AllowedHosts
// are dialed unchecked. A refusal names the host asked for.
func (p Policy) DialContext(ctx context.Context, network, addr string, timeout time.Duration) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if p.Enabled && p.hostAllowed(host) {
		return (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
	}
	// A loose IPv4 spelling (0xa9fea9fe) is the address curl would use.
	if ip := ParseIP(host); ip != nil {
		if err := p.checkIP(host, ip); err != nil {
			return nil, err
		}
		addr = net.JoinHostPort(ip.String(), port)
	} else if err := p.CheckHost(host); err != nil {
		return nil, err
	}
	conn, err := p.Dialer(timeout).DialContext(ctx, network, addr)
	var blocked *BlockedError
	if errors.As(err, &blocked) {
		b := *blocked
		b.Host = host
		return nil, &b
	}
	return conn, err
}

// Client is an HTTP client whose every connection (redirects included)
// passes the policy.
func (p Policy) Client(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return p.DialContext(ctx, network, addr, 10*time.Second)
		},
		Proxy:                 nil, // a proxy would hide the real destination from the check
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Timeout:   timeout,
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if _, err := p.CheckURL(req.URL.String()); err != nil {
				return err
			}
			return nil
		},
	}
}
