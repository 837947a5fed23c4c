package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/netguard"
)

// TargetError is a destination Agentry refuses to send to (not http(s),
// not absolute, or blocked by the SSRF policy). The API answers 400.
type TargetError struct {
	Field string // "to", "url", hooks[i].url
	Msg   string
}

func (e *TargetError) Error() string { return e.Field + ": " + e.Msg }

// Fault implements fault.Fault: 400 destination_refused, naming the field.
func (e *TargetError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindInvalid, Code: "destination_refused", Message: e.Error(), Fields: map[string]any{"field": e.Field}}
}

// Resolver looks host names up (net.DefaultResolver; tests may fake it).
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// CheckTarget validates a destination before anything is queued: an
// absolute http or https URL whose address passes the SSRF policy. A host
// name is resolved now and every address checked, so a `to` naming a
// private host is refused with 400 instead of failing later; the dialer
// checks again at connection time (DNS may change in between).
func CheckTarget(ctx context.Context, p netguard.Policy, r Resolver, field, raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, &TargetError{Field: field, Msg: fmt.Sprintf("%q is not an absolute http or https URL", raw)}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &TargetError{Field: field, Msg: fmt.Sprintf("scheme %q is not allowed (use http or https)", u.Scheme)}
	}
	if _, err := p.CheckURL(raw); err != nil {
		return nil, &TargetError{Field: field, Msg: err.Error()}
	}
	host := u.Hostname()
	if !p.Enabled || net.ParseIP(host) != nil || hostListed(p, host) {
		return u, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := r.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, &TargetError{Field: field, Msg: fmt.Sprintf("cannot resolve host %s", host)}
	}
	check := p.Dialer(time.Second).Control
	for _, a := range addrs {
		if err := check("tcp", net.JoinHostPort(a.IP.String(), "0"), nil); err != nil {
			return nil, &TargetError{Field: field, Msg: fmt.Sprintf("%s resolves to %v", host, err)}
		}
	}
	return u, nil
}

func hostListed(p netguard.Policy, host string) bool {
	for _, h := range p.AllowedHosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// IsBlocked reports an SSRF refusal at dial time.
func IsBlocked(err error) bool { return errors.Is(err, netguard.ErrBlocked) }

// DisplayURL strips user info and the query (they may carry credentials)
// for records and status.
func DisplayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
