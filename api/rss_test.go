package api

import (
	"bytes"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// vmRSS reads this process's resident set from /proc/self/status (kB).
func vmRSS(t *testing.T) int {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb int
			for _, f := range strings.Fields(line)[1:2] {
				for _, r := range f {
					kb = kb*10 + int(r-'0')
				}
			}
			return kb
		}
	}
	return 0
}

// TestRSSAfterProbeSizedBadInput measures (it asserts nothing about time)
// what probe-sized bad input leaves resident: 400 bodies near and over the
// 4 MiB limit from 16 clients at once, then a pause. Run with
// AGENTRY_RSS=1 -v; figures in docs/decisions.md (#42).
func TestRSSAfterProbeSizedBadInput(t *testing.T) {
	if os.Getenv("AGENTRY_RSS") == "" {
		t.Skip("a measurement: AGENTRY_RSS=1")
	}
	s := newTestServer(t, func(d *Deps) { d.Config.Server.MaxBodyBytes = 4 << 20 })
	addr := serveLoopback(t, s)
	before := vmRSS(t)
	bodies := [][]byte{bytes.Repeat([]byte("x"), 4<<20-100), append([]byte(`{"a":"`), bytes.Repeat([]byte("y"), 4<<20-200)...), bytes.Repeat([]byte("z"), 5<<20)}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/whoami", bytes.NewReader(bodies[(w+i)%len(bodies)]))
				req.Header.Set("Authorization", "Bearer "+testKey)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	peak := vmRSS(t)
	runtime.GC()
	time.Sleep(10 * time.Second)
	after := vmRSS(t)
	t.Logf("VmRSS before %d MB, after 400 bad bodies %d MB, 10 s later %d MB", before/1024, peak/1024, after/1024)
}
