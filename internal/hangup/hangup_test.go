package hangup

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"
)

// pair returns the server side and the client side of a loopback TCP connection.
func pair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestClientCloseCancelsTheRequest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("connections are watched on Linux only")
	}
	w := New(5 * time.Millisecond)
	server, client := pair(t)
	ctx, stop := w.Watch(context.Background(), server)
	defer stop()
	client.Close()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a closed client did not cancel the request")
	}
}

func TestWaitingDataIsNotAHangup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("connections are watched on Linux only")
	}
	w := New(time.Millisecond)
	server, client := pair(t)
	ctx, stop := w.Watch(context.Background(), server)
	// A pipelined next request waits on the socket: not consumed, not a hangup.
	if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	// Let the watcher look a few times (no timing assertion: it must not
	// cancel however often it looks).
	for i := 0; i < 20; i++ {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("waiting data was taken for a hangup")
	}
	stop()
	if ctx.Err() == nil {
		t.Fatal("stop must cancel the context")
	}
	buf := make([]byte, 16)
	server.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := server.Read(buf); err != nil || string(buf[:n]) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("the peek consumed data: %q %v", buf[:n], err)
	}
}

func TestUnwatchableConnectionStillCancels(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var w *Watcher
	ctx, stop := w.Watch(context.Background(), a)
	stop()
	if ctx.Err() == nil {
		t.Fatal("stop must cancel the context")
	}
}
