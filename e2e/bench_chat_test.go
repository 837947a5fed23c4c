package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// BenchmarkChatPath measures what the gateway adds to a chat request:
// the same request shape sent to the fake provider directly and through
// POST /api/v1/chat (auth, agent lookup, session history, action log,
// router, provider client, conversation store). Reported: p50/p99 per
// request of both, the added p50, and requests/second at 64 clients.
//
//	go test -run '^$' -bench ChatPath -benchtime 3000x ./e2e/
func BenchmarkChatPath(b *testing.B) {
	g := gatewaytest.Start(b, gatewaytest.Options{Config: os.Getenv("BENCH_CONFIG"), Agents: map[string]string{"gpt.yaml": "id: gpt\nllm: {provider: openai, model: gpt-4o-mini}\n"}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128}}
	direct := func(i int) error {
		body := fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello %d"}]}`, i)
		return post(client, g.Fake.OpenAIBaseURL()+"/chat/completions", "", body)
	}
	gateway := func(i int) error {
		body := fmt.Sprintf(`{"agent_id":"gpt","text":"hello %d","user_id":"bench-%d"}`, i, i%512)
		return post(client, g.URL()+"/api/v1/chat", gatewaytest.TestAPIKey, body)
	}
	n := b.N
	if n < 200 {
		n = 200
	}
	b.ResetTimer()
	dp50, dp99 := sequential(b, n, direct)
	gp50, gp99 := sequential(b, n, gateway)
	rps := concurrent(b, n, 64, gateway)
	b.StopTimer()
	b.ReportMetric(float64(dp50.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(dp99.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(gp50.Microseconds()), "gateway-p50-µs")
	b.ReportMetric(float64(gp99.Microseconds()), "gateway-p99-µs")
	b.ReportMetric(float64((gp50 - dp50).Microseconds()), "added-p50-µs")
	b.ReportMetric(rps, "req/s@64")
}

func post(c *http.Client, url, key, body string) error {
	req, _ := http.NewRequest("POST", url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func sequential(b *testing.B, n int, f func(int) error) (p50, p99 time.Duration) {
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(i); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

func concurrent(b *testing.B, n, workers int, f func(int) error) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				if err := f(i); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d requests failed", failed.Load())
	}
	return float64(n) / time.Since(start).Seconds()
}
