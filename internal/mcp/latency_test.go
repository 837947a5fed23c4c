package mcp

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"sort"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentryhq/agentry/dev/mcpserver"
)

// BenchmarkMCPCallLatency measures the latency the gateway adds to an MCP
// tool call: the same echo call made directly with the SDK client and
// through the gateway's call path (Manager.Call: tool lookup, argument
// validation against the input schema, session bookkeeping, scrubbing),
// over streamable HTTP and stdio. It reports p50 of each and the added
// p50 (docs/benchmarks.md):
//
//	go test -run '^$' -bench MCPCallLatency -benchtime 2000x ./internal/mcp/
func BenchmarkMCPCallLatency(b *testing.B) {
	ctx := context.Background()
	ts := httptest.NewServer(mcpserver.Handler(mcpserver.New(mcpserver.Options{})))
	defer func() { ts.CloseClientConnections(); ts.Close() }()
	transports := map[string]struct {
		spec   Spec
		direct func() sdk.Transport
	}{
		"http": {Spec{ID: "bench", Transport: TransportHTTP, URL: ts.URL},
			func() sdk.Transport { return &sdk.StreamableClientTransport{Endpoint: ts.URL} }},
		"stdio": {stdioSpec("bench"), func() sdk.Transport {
			s := stdioSpec("bench")
			cmd := exec.Command(s.Command, s.Args...)
			cmd.Env = []string{"AGENTRY_TEST_MCPSERVER=stdio"}
			return &sdk.CommandTransport{Command: cmd}
		}},
	}
	for _, name := range []string{"http", "stdio"} {
		tr := transports[name]
		b.Run(name, func(b *testing.B) {
			client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
			session, err := client.Connect(ctx, tr.direct(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer session.Close()
			m := NewManager(loopback(), nil)
			defer m.Close()
			p, err := m.Dial(ctx, tr.spec)
			if err != nil {
				b.Fatal(err)
			}
			m.Install(p)
			args := json.RawMessage(`{"text":"ping"}`)
			direct := func() {
				if _, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ping"}}); err != nil {
					b.Fatal(err)
				}
			}
			gateway := func() {
				if res, err := m.Call(ctx, "mcp__bench__echo", args); err != nil || res.IsError {
					b.Fatal(res, err)
				}
			}
			for range 20 { // warm both paths
				direct()
				gateway()
			}
			d, g := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				// Interleaved, so load on the machine hits both alike.
				t0 := time.Now()
				direct()
				t1 := time.Now()
				gateway()
				d, g = append(d, t1.Sub(t0)), append(g, time.Since(t1))
			}
			pd, pg := p50(d), p50(g)
			b.ReportMetric(float64(pd.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(pg.Microseconds()), "gateway-p50-µs")
			b.ReportMetric(float64((pg - pd).Microseconds()), "added-p50-µs")
			b.ReportMetric(float64(pg)/float64(pd), "ratio")
		})
	}
}

func p50(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}
