package costs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/testenv"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// backends returns a fresh limiter of each kind with its clock. Each maker
// takes the subtest's t: a skip (Redis not installed) or failure must end
// the subtest, never its parent from inside the subtest.
func limiterBackends() map[string]func(t *testing.T) (Limiter, *testClock) {
	return map[string]func(t *testing.T) (Limiter, *testClock){
		"memory": func(*testing.T) (Limiter, *testClock) {
			clk := &testClock{t: time.Unix(1_700_000_000, 0)}
			return NewMemoryLimiter(clk.Now), clk
		},
		"redis": func(t *testing.T) (Limiter, *testClock) {
			url := testenv.Redis(t)
			if url == "" {
				t.Skip("Redis not available")
			}
			clk := &testClock{t: time.Unix(1_700_000_000, 0)}
			lim, err := NewRedisLimiter(url, "test:", clk.Now)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lim.Close() })
			return lim, clk
		},
	}
}

// TestLimiterSemantics runs one specification against both backends.
func TestLimiterSemantics(t *testing.T) {
	for name, mk := range limiterBackends() {
		t.Run(name, func(t *testing.T) {
			lim, clk := mk(t)
			ctx := context.Background()
			take := func(key, member string, want, min int64) (int64, time.Duration) {
				t.Helper()
				got, retry, err := lim.Take(ctx, key, member, time.Minute, 100, want, min)
				if err != nil {
					t.Fatal(err)
				}
				return got, retry
			}
			if got, _ := take("k", "a", 60, 60); got != 60 {
				t.Fatalf("first take granted %d", got)
			}
			clk.Advance(10 * time.Second)
			// Idempotent per member.
			if got, _ := take("k", "a", 60, 60); got != 60 {
				t.Fatalf("repeated member granted %d", got)
			}
			if used, _ := lim.Used(ctx, "k", time.Minute); used != 60 {
				t.Fatalf("used %d after a repeated member", used)
			}
			// Clamped to what fits, down to min.
			if got, _ := take("k", "b", 60, 20); got != 40 {
				t.Fatalf("clamped take granted %d, want 40", got)
			}
			// Nothing fits: refused with the time until the oldest leaves.
			got, retry := take("k", "c", 10, 10)
			if got != 0 || retry != 50*time.Second {
				t.Fatalf("full window granted %d retry %s, want 0 and 50s", got, retry)
			}
			// Correcting an entry frees room.
			if err := lim.Set(ctx, "k", "a", time.Minute, 30); err != nil {
				t.Fatal(err)
			}
			if got, _ := take("k", "c", 30, 30); got != 30 {
				t.Fatalf("after correction granted %d", got)
			}
			if err := lim.Set(ctx, "k", "b", time.Minute, 0); err != nil {
				t.Fatal(err)
			}
			if used, _ := lim.Used(ctx, "k", time.Minute); used != 60 {
				t.Fatalf("used %d after dropping b", used)
			}
			// Setting an unknown member is ignored.
			if err := lim.Set(ctx, "k", "zzz", time.Minute, 50); err != nil {
				t.Fatal(err)
			}
			if used, _ := lim.Used(ctx, "k", time.Minute); used != 60 {
				t.Fatalf("used %d after setting an unknown member", used)
			}
			// Entries leave the window after its span.
			clk.Advance(51 * time.Second) // a is 61 s old, c 51 s
			if used, _ := lim.Used(ctx, "k", time.Minute); used != 30 {
				t.Fatalf("used %d after a expired", used)
			}
			clk.Advance(10 * time.Second)
			if used, _ := lim.Used(ctx, "k", time.Minute); used != 0 {
				t.Fatalf("used %d after all expired", used)
			}
			// Keys are independent; a want above the limit is refused.
			if got, retry := take("other", "x", 101, 101); got != 0 || retry != time.Minute {
				t.Fatalf("oversized take granted %d retry %s", got, retry)
			}
		})
	}
}

func TestLimiterConcurrentTakesNeverExceedTheLimit(t *testing.T) {
	for name, mk := range limiterBackends() {
		t.Run(name, func(t *testing.T) {
			lim, _ := mk(t)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var total int64
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, _, err := lim.Take(context.Background(), "c", string(rune('A'+i)), time.Minute, 100, 7, 7)
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					total += got
					mu.Unlock()
				}()
			}
			wg.Wait()
			if total != 98 { // 14 takes of 7
				t.Fatalf("granted %d in total, want 98", total)
			}
		})
	}
}

func TestMemoryLimiterSweepsIdleWindows(t *testing.T) {
	clk := &testClock{t: time.Unix(1_700_000_000, 0)}
	lim := NewMemoryLimiter(clk.Now).(*memoryLimiter)
	lim.Take(context.Background(), "idle", "m", time.Minute, 10, 1, 1)
	clk.Advance(2 * time.Minute)
	lim.sweep()
	if len(lim.windows) != 0 {
		t.Fatalf("%d windows left", len(lim.windows))
	}
}
