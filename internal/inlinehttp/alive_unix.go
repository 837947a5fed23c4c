//go:build unix

package inlinehttp

import "syscall"

// alive reports whether an idle connection can take a request: the peer
// has not closed it and sent nothing since its last response (an idle
// HTTP/1.1 connection has nothing to read; on TLS that may be a
// close_notify). One non-blocking peek at the socket, on this goroutine.
func (c *conn) alive() bool {
	if c.raw == nil {
		return true
	}
	var buf [1]byte
	var err error
	ctlErr := c.raw.Read(func(fd uintptr) bool {
		_, _, err = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // done: never wait for the socket to become readable
	})
	// Nothing to read is the one good answer: a read of 0 bytes is the
	// peer's close, a byte is something no request asked for.
	return ctlErr == nil && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
}
