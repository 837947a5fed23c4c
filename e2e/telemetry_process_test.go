package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// blackHole accepts connections and never answers: a collector that hangs,
// worse for a client than a closed port.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// droppedSpans reads agentry_telemetry_spans_dropped_total{reason} from a
// public /metrics.
func droppedSpans(t *testing.T, base, reason string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prefix := `agentry_telemetry_spans_dropped_total{reason="` + reason + `"} `
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatalf("no %s in /metrics", prefix)
	return 0
}

// TestUnreachableCollectorNeverHurtsRequests runs the real binary with
// OTLP export to a collector that accepts connections and never answers:
// the gateway starts, every request is answered (with its trace id) while
// exports hang, the lost spans are counted in
// agentry_telemetry_spans_dropped_total, one warning is logged however many
// exports fail, and SIGTERM still stops the process in time.
func TestUnreachableCollectorNeverHurtsRequests(t *testing.T) {
	bin := gatewaytest.Binary(t, "agentryd")
	env, port, _ := gatewayEnv(t, t.TempDir())
	env["AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED"] = "false"
	env["AGENTRY_TELEMETRY_EXPORTER"] = "otlp"
	env["AGENTRY_TELEMETRY_ENDPOINT"] = blackHole(t)
	env["AGENTRY_TELEMETRY_METRICS_PUBLIC"] = "true"
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := gatewaytest.StartProcess(t, bin, env)
	gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, p)

	// requests sends n requests; each must be answered with a trace id.
	requests := func(n int) {
		t.Helper()
		client := &http.Client{Timeout: 10 * time.Second}
		for i := 0; i < n; i++ {
			resp, err := client.Get(base + "/health")
			if err != nil {
				t.Fatalf("request %d while the collector hangs: %v", i, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || len(resp.Header.Get("X-Trace-ID")) != 32 {
				t.Fatalf("request %d: %d, trace id %q", i, resp.StatusCode, resp.Header.Get("X-Trace-ID"))
			}
		}
	}
	// waitDropped waits until more than min spans were lost to failed exports.
	waitDropped := func(min float64) float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if n := droppedSpans(t, base, "export_failed"); n > min {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("no spans counted as dropped after 60 s\n%s", p.Output)
			}
			requests(5) // keep requests flowing while the export hangs
			time.Sleep(500 * time.Millisecond)
		}
	}
	requests(50)
	first := waitDropped(0)
	requests(50)
	waitDropped(first)
	if n := strings.Count(p.Output.String(), "exporting spans failed"); n != 1 {
		t.Fatalf("%d warnings about failed exports, want 1\n%s", n, p.Output)
	}
	stopWithin(t, p, syscall.SIGTERM, 10*time.Second)
}
