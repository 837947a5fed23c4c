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

// ErrBlocked is returned for a refused destination.
var ErrBlocked = errors.New("destination not allowed by the SSRF policy")

// CheckURL validates scheme and, for literal IPs or allowed hosts, the
// address. Names are checked again at dial time.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: only http and https URLs are allowed", raw)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		if err := p.checkIP(u.Hostname(), ip); err != nil {
			return nil, err
		}
	} else if p.Enabled && !p.hostAllowed(u.Hostname()) && strings.EqualFold(u.Hostname(), "localhost") && !p.AllowLoopback {
		return nil, fmt.Errorf("%s: %w (loopback)", u.Hostname(), ErrBlocked)
	}
	return u, nil
}

func (p Policy) hostAllowed(host string) bool {
	return slices.ContainsFunc(p.AllowedHosts, func(h string) bool { return strings.EqualFold(h, host) })
}

func (p Policy) checkIP(host string, ip net.IP) error {
	if !p.Enabled || p.hostAllowed(host) || p.hostAllowed(ip.String()) {
		return nil
	}
	if err := p.classify(ip); err != nil {
		return err
	}
	// An IPv6 address that carries an IPv4 address (IPv4-compatible, NAT64,
	// 6to4, Teredo) reaches that IPv4 host through a translator or tunnel:
	// it is judged by the embedded address too.
	for _, v4 := range EmbeddedIPv4(ip) {
		if err := p.classify(v4); err != nil {
			return fmt.Errorf("%s embeds %w", ip, err)
		}
	}
	return nil
}

var (
	nat64      = mustCIDR("64:ff9b::/96")
	nat64Local = mustCIDR("64:ff9b:1::/48")
	sixToFour  = mustCIDR("2002::/16")
	teredo     = mustCIDR("2001::/32")
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
// RFC 6052's /48 layout), 6to4 (2002:aabb:ccdd::/48) and Teredo (server and
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
	case nat64.Contains(ip):
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

// classify refuses ip by its own range.
func (p Policy) classify(ip net.IP) error {
	switch {
	case ip.IsLoopback():
		if !p.AllowLoopback {
			return fmt.Errorf("%s: %w (loopback)", ip, ErrBlocked)
		}
	case ip.IsPrivate(), isCGNAT(ip):
		if !p.AllowPrivate {
			return fmt.Errorf("%s: %w (private range)", ip, ErrBlocked)
		}
	case ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%s: %w (link-local, multicast or unspecified)", ip, ErrBlocked)
	}
	return nil
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

// Client is an HTTP client whose every connection (redirects included)
// passes the policy.
func (p Policy) Client(timeout time.Duration) *http.Client {
	d := p.Dialer(10 * time.Second)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			// Allowed host names bypass the IP check entirely.
			if host, _, err := net.SplitHostPort(addr); err == nil && p.hostAllowed(host) {
				return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
			}
			return d.DialContext(ctx, network, addr)
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
