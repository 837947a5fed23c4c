package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentryhq/agentry/dev/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestLostHTTPServerIsATransportError: a streamable HTTP server that
// answers 503 (a proxy in front of it) or goes away mid-session makes a
// call fail with a *TransportError naming the server (durable runs retry
// it), never a tool result, which stays what the tool's own isError is. The
// go-sdk reports both as its "rejected by transport" protocol error.
func TestLostHTTPServerIsATransportError(t *testing.T) {
	var unavailable atomic.Bool
	h := mcpserver.Handler(mcpserver.New(mcpserver.Options{}))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unavailable.Load() && r.Method == http.MethodPost {
			http.Error(w, "upstream gone", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	m := NewManager(loopback(), nil)
	defer m.Close()
	install(t, m, Spec{ID: "web", Transport: TransportHTTP, URL: ts.URL})
	if res := call(t, m, "mcp__web__fail", `{"message":"own error"}`); !res.IsError || !strings.Contains(res.Content, "own error") {
		t.Fatalf("a tool's own error is a result: %+v", res)
	}

	wantTransportError := func(when string) {
		t.Helper()
		res, err := m.Call(context.Background(), "mcp__web__echo", json.RawMessage(`{"text":"x"}`))
		var te *TransportError
		if !errors.As(err, &te) || te.ServerID != "web" {
			t.Fatalf("%s: want a TransportError naming web, got result %+v, err %v", when, res, err)
		}
		t.Logf("%s: %v", when, err)
	}
	unavailable.Store(true)
	wantTransportError("503")
	unavailable.Store(false)
	// The failed call retired the session; the next one reconnects itself
	// rather than waiting for the background redial.
	if res := call(t, m, "mcp__web__echo", `{"text":"back"}`); res.Content != "back" {
		t.Fatalf("call after the 503: %+v", res)
	}

	ts.CloseClientConnections()
	ts.Close()
	wantTransportError("server shut down")
}

// TestServerAnswerSkipsTheSDKsOwnErrors pins the shapes the go-sdk v1.8
// gives a failed call (see serverAnswer) so an SDK upgrade that changes
// them fails here rather than in a run.
func TestServerAnswerSkipsTheSDKsOwnErrors(t *testing.T) {
	rejected := &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}
	invalid := &jsonrpc.Error{Code: -32602, Message: "invalid params"}
	cases := map[string]struct {
		err    error
		answer bool
	}{
		"connection refused":    {fmt.Errorf("sending \"tools/call\": %w: %w", rejected, errors.New("dial tcp: connection refused")), false},
		"503":                   {fmt.Errorf("%w: sending \"tools/call\": Service Unavailable", rejected), false},
		"server error":          {fmt.Errorf("calling \"tools/call\": %w", invalid), true},
		"error body with a 400": {fmt.Errorf("sending: %w: %w: Bad Request", invalid, rejected), true},
		"plain network error":   {errors.New("EOF"), false},
	}
	for name, c := range cases {
		if got := serverAnswer(c.err) != nil; got != c.answer {
			t.Errorf("%s: server answer %v, want %v", name, got, c.answer)
		}
	}
}
