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
