package api

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// serveLoopback serves s on a loopback port and returns its address.
func serveLoopback(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return ln.Addr().String()
}

// rawStatus sends one request written byte for byte (so blanks in headers
// reach the server exactly as written) and returns the response status.
func rawStatus(t *testing.T, addr, req string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBearerBlanksAreAllAlike: a trailing tab after the key was refused
// while a trailing space was accepted (#42). Every ASCII blank around the
// scheme and the key is ignored; whitespace inside the key, or a non-ASCII
// space around it, is still no key.
func TestBearerBlanksAreAllAlike(t *testing.T) {
	addr := serveLoopback(t, newTestServer(t, nil))
	for header, want := range map[string]int{
		"Bearer " + testKey:                          200,
		"Bearer " + testKey + " ":                    200,
		"Bearer " + testKey + "\t":                   200,
		"Bearer " + testKey + " \t ":                 200,
		"Bearer\t" + testKey:                         200,
		"bearer  \t" + testKey:                       200,
		"\tBearer " + testKey:                        200,
		"Bearer " + testKey + "\u00a0":               401,
		"Bearer " + testKey[:4] + "\t" + testKey[4:]: 401,
		"Bearer\t":         401,
		"Bearer":           401,
		"Bearer" + testKey: 401,
	} {
		got := rawStatus(t, addr, fmt.Sprintf("GET /api/v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nConnection: close\r\n\r\n", header))
		if got != want {
			t.Errorf("Authorization %q: status %d, want %d", header, got, want)
		}
	}
	if got, ok := bearerToken(strings.Repeat(" ", 3) + "Bearer " + testKey + "\t"); !ok || got != testKey {
		t.Errorf("bearerToken: %q", got)
	}
}
