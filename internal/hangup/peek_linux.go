package hangup

import (
	"errors"
	"net"
	"syscall"
)

// watchable reports whether conn can be peeked at: a TCP or Unix
// connection (TLS is not, see the package comment).
func watchable(conn net.Conn) bool {
	switch conn.(type) {
	case interface{ Unwrap() net.Conn }:
		return watchable(unwrap(conn))
	case *net.TCPConn, *net.UnixConn:
		return true
	}
	return false
}

// peek looks at a watchable connection without consuming a byte.
func peek(conn net.Conn) state {
	sc, ok := unwrap(conn).(syscall.Conn)
	if !ok {
		return alive
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return alive
	}
	st := alive
	var buf [1]byte
	_ = raw.Control(func(fd uintptr) {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil && n == 0:
			st = gone // orderly shutdown by the peer
		case err == nil:
			// Data waiting (a pipelined request): still there.
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		default:
			st = gone // reset, or the descriptor is no longer a socket
		}
	})
	return st
}

// unwrap is the connection under a server's wrapper (one with an
// Unwrap() net.Conn method, as api's lingering close has), else conn.
// tls.Conn has none, so TLS stays unwatched.
func unwrap(conn net.Conn) net.Conn {
	for {
		u, ok := conn.(interface{ Unwrap() net.Conn })
		if !ok {
			return conn
		}
		conn = u.Unwrap()
	}
}
