package models

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

func TestEventsDedupeFilterAndOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()

		first := NewEvent("run.started", "k-1", map[string]any{"x": 1})
		first.TaskID, first.RunID, first.AgentID, first.Attempt = 7, 3, "writer", 1
		ok, err := s.InsertEvent(ctx, &first)
		if err != nil || !ok || first.ID == 0 {
			t.Fatalf("insert: %v %v %d", ok, err, first.ID)
		}
		dup := NewEvent("run.started", "k-1", nil)
		ok, err = s.InsertEvent(ctx, &dup)
		if err != nil || ok || dup.ID != 0 {
			t.Fatalf("duplicate: %v %v %d", ok, err, dup.ID)
		}
		other := NewEvent("task.created", "", nil)
		other.TaskID = 8
		if _, err := s.InsertEvent(ctx, &other); err != nil {
			t.Fatal(err)
		}
		pct := NewEvent("run_x", "", nil) // "_" must not act as a LIKE wildcard
		if _, err := s.InsertEvent(ctx, &pct); err != nil {
			t.Fatal(err)
		}

		check := func(f EventFilter, after int64, want ...int64) {
			t.Helper()
			evs, err := s.EventsAfter(ctx, after, f, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, e := range evs {
				got = append(got, e.ID)
				if !f.Match(e) {
					t.Errorf("SQL and Match disagree on %+v", e)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("filter %+v after %d: got %v, want %v", f, after, got, want)
			}
		}
		check(EventFilter{}, 0, first.ID, other.ID, pct.ID)
		check(EventFilter{}, first.ID, other.ID, pct.ID)
		check(EventFilter{TypePrefixes: []string{"run."}}, 0, first.ID)
		check(EventFilter{TypePrefixes: []string{"task.", "run.started"}}, 0, first.ID, other.ID)
		check(EventFilter{TaskID: 8}, 0, other.ID)
		check(EventFilter{AgentID: "writer"}, 0, first.ID)
		last, err := s.LastEventID(ctx)
		if err != nil || last != pct.ID {
			t.Fatalf("last id %d %v", last, err)
		}

		b, _ := json.Marshal(first)
		var back map[string]any
		json.Unmarshal(b, &back)
		if back["type"] != "run.started" || back["task_id"] != float64(7) || back["run_id"] != float64(3) ||
			back["attempt"] != float64(1) || back["payload"].(map[string]any)["x"] != float64(1) {
			t.Fatalf("wire form %s", b)
		}
	})
}

// Concurrent inserts become visible in id order: a reader that tails by
// id never sees a gap filled later.
func TestEventsVisibleInIDOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		const writers, each = 4, 25
		var wg sync.WaitGroup
		done := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					ev := NewEvent("load.tick", fmt.Sprintf("w%d-%d", w, i), nil)
					if _, err := s.InsertEvent(ctx, &ev); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		go func() { wg.Wait(); close(done) }()
		var seen []int64
		last := int64(0)
		tail := func() {
			evs, err := s.EventsAfter(ctx, last, EventFilter{}, 1000)
			if err != nil {
				t.Error(err)
				return
			}
			for _, e := range evs {
				seen = append(seen, e.ID)
				last = e.ID
			}
		}
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			tail()
		}
		tail()
		if len(seen) != writers*each {
			t.Fatalf("tailing saw %d of %d events (a later commit with a smaller id was skipped)", len(seen), writers*each)
		}
	})
}
