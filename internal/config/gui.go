package config

import (
	"net"
	"strings"
)

// GUIEnabled reports whether the operator console is served: server.gui
// when set, else true exactly when the listener is loopback-only (a
// gateway bound to other interfaces shows no console unless asked to).
func (s ServerConfig) GUIEnabled() bool {
	if s.GUI != nil {
		return *s.GUI
	}
	return IsLoopbackHost(s.Host)
}

// IsLoopbackHost reports whether host (an IP or "localhost") names only the
// loopback interface. "" and "0.0.0.0" listen everywhere: not loopback.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
