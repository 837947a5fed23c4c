package plugins

import (
	"context"
	"testing"
)

// BenchmarkExamplePluginToolCall is one call of the example plugin's tool
// through the gateway's MCP client: JSON-RPC over the stdio of a process
// confined by bubblewrap (the jail is paid once, at start, not per call).
// docs/benchmarks.md, "Plugins".
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/plugins/
func BenchmarkExamplePluginToolCall(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	examplePlugin(b, root)
	r, m := newRegistry(b, []string{root}, map[string]any{"greeter": map[string]any{"greeting": "Ahoy"}})
	r.Rescan(ctx)
	waitRunning(b, r, "greeter")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res, err := m.Call(ctx, "mcp__greeter__greet", []byte(`{"name":"Ada"}`)); err != nil || res.Content != "Ahoy, Ada!" {
			b.Fatalf("call = %+v, %v", res, err)
		}
	}
}
