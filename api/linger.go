package api

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// A request whose body is over server.max_body_bytes is answered 413 by
// fasthttp, which then closes the connection at once. With the rest of the
// body still arriving, the kernel answers the unread bytes with a reset,
// and a client still sending sees "connection reset" instead of the 413
// envelope (8 of 21 such requests in the probe, #42). A connection marked
// by the error handler is closed the way net/http does it: half-close the
// sending side (the client gets the answer and an end of stream), read and
// discard what is still coming for a bounded time and amount, then close.
// Nothing read is kept.
const (
	lingerTime  = 3 * time.Second
	lingerBytes = 64 << 20
)

// lingerListener wraps accepted connections in lingerConn.
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c}, nil
}

// lingerConn closes with a linger when marked.
type lingerConn struct {
	net.Conn
	linger atomic.Bool
}

// Unwrap is the accepted connection (internal/hangup watches it).
func (c *lingerConn) Unwrap() net.Conn { return c.Conn }

// Close drains the unread request first when marked.
func (c *lingerConn) Close() error {
	if c.linger.Load() {
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
			_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
		}
	}
	return c.Conn.Close()
}

// markLinger asks for a lingering close of conn (a no-op for others).
func markLinger(conn net.Conn) {
	if lc, ok := conn.(*lingerConn); ok {
		lc.linger.Store(true)
	}
}
