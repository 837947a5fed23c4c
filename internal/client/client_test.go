package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	stream := "data: Hel\n\ndata: lo\ndata:  world\n\n: ping\n\nevent: error\ndata: {\"error\":\"boom\"}\n\ndata: [DONE]\n\n"
	var got []Event
	if err := ReadEvents(strings.NewReader(stream), func(e Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []Event{{Data: "Hel"}, {Data: "lo\n world"}, {Name: "error", Data: `{"error":"boom"}`}, {Data: "[DONE]"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %q\nwant %q", got, want)
	}
}

func TestErrorsAndUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "gw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("unix sockets unavailable: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/agents/missing", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"agent \"missing\" not found","code":"not_found"}`)
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		fmt.Fprint(w, `{"status":"degraded","version":"t","checks":{"temporal":{"status":"error","error":"down"}}}`)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c, err := New("unix://"+sock, "k", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Agent(context.Background(), "missing")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" || !strings.Contains(err.Error(), `agent "missing" not found`) {
		t.Fatalf("err = %v", err)
	}
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "degraded" || h.Checks["temporal"].Error != "down" || len(h.RawJSON()) == 0 {
		t.Fatalf("health = %+v, %v", h, err)
	}
	dead, _ := New("http://127.0.0.1:1", "", Options{})
	_, err = dead.Agents(context.Background())
	var ce *ConnectionError
	if !errors.As(err, &ce) {
		t.Fatalf("dead gateway = %T %v", err, err)
	}
	if _, err := New("ftp://x", "", Options{}); err == nil {
		t.Fatal("ftp accepted")
	}
}
