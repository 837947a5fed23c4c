//go:build !unix

package inlinehttp

// alive cannot peek at a socket here; a connection the peer closed fails
// its next request.
func (c *conn) alive() bool { return true }
