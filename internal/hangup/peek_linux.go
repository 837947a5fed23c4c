package hangup

import (
	"errors"
	"net"
	"syscall"
)

// peeker returns a non-consuming check of a TCP or Unix connection (nil for
// anything else, TLS included).
func peeker(conn net.Conn) func() state {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var buf [1]byte
	return func() state {
		st := alive
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
}
