package mcp

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/agentryhq/agentry/dev/mcpserver"
	"github.com/agentryhq/agentry/drivers"
)

// TestCallCarriesIdempotencyKeyInMeta calls the dev server's idem tool
// (which answers with the key it found in the request's _meta) over
// streamable HTTP: a call made with a key in its context carries it under
// MetaIdempotencyKey, a call without one carries none, and the SDK's own
// _meta entries do not displace it.
func TestCallCarriesIdempotencyKeyInMeta(t *testing.T) {
	if mcpserver.MetaIdempotencyKey != MetaIdempotencyKey {
		t.Fatalf("the dev server reads %q, the client sends %q", mcpserver.MetaIdempotencyKey, MetaIdempotencyKey)
	}
	ts := httptest.NewServer(mcpserver.Handler(mcpserver.New(mcpserver.Options{})))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	m := NewManager(loopback(), nil)
	defer m.Close()
	install(t, m, Spec{ID: "rec", Transport: TransportHTTP, URL: ts.URL})

	for _, key := range []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"} {
		ctx := drivers.WithIdempotencyKey(context.Background(), key)
		res, err := m.Call(ctx, "mcp__rec__idem", json.RawMessage(`{"tag":"x"}`))
		if err != nil || res.IsError || res.Content != "key="+key {
			t.Fatalf("call with key %s: %+v %v", key, res, err)
		}
	}
	if res := call(t, m, "mcp__rec__idem", `{}`); res.Content != "key=" {
		t.Fatalf("a call without a key carried one: %+v", res)
	}
}
