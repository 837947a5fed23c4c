//go:build !linux

package hangup

import "net"

// peeker watches nothing outside Linux (see the package comment).
func peeker(net.Conn) func() state { return nil }
