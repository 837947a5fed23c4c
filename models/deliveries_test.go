package models

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestIdempotencyClaimIsExclusive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		const n = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		claimed, owner := 0, ""
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := fmt.Sprintf("owner-%d", i)
				rec := &WebhookIdempotency{Key: "k1", AgentID: "a", BodyHash: "h", Owner: me, ExpiresAt: time.Now().Add(time.Hour)}
				_, ok, err := s.ClaimIdempotency(ctx, rec, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					claimed++
					owner = me
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if claimed != 1 {
			t.Fatalf("%d concurrent claims succeeded, want 1", claimed)
		}
		// Only the owner completes, renews or releases its claim.
		if ok, err := s.RenewIdempotency(ctx, "k1", "someone-else", time.Minute); ok || err != nil {
			t.Fatalf("a stranger renewed the claim: %v %v", ok, err)
		}
		if err := s.CompleteIdempotency(ctx, "k1", "someone-else", `{"reply":"forged"}`); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteIdempotency(ctx, "k1", owner, `{"reply":"x"}`); err != nil {
			t.Fatal(err)
		}
		have, ok, err := s.ClaimIdempotency(ctx, &WebhookIdempotency{Key: "k1", Owner: "late", ExpiresAt: time.Now().Add(time.Hour)}, time.Minute)
		if err != nil || ok || have.Status != IdempotencyDone || have.Response != `{"reply":"x"}` {
			t.Fatalf("repeat: %+v %v %v", have, ok, err)
		}

		// Expired records and claims whose lease ran out make way; released claims too.
		if err := s.DB.Model(&WebhookIdempotency{}).Where("idem_key = ?", "k1").Update("expires_at", time.Now().Add(-time.Second)).Error; err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.ClaimIdempotency(ctx, &WebhookIdempotency{Key: "k1", Owner: "o1", ExpiresAt: time.Now().Add(time.Hour)}, -time.Second); !ok {
			t.Fatal("expired record was not replaced")
		}
		if _, ok, _ := s.ClaimIdempotency(ctx, &WebhookIdempotency{Key: "k1", Owner: "o2", ExpiresAt: time.Now().Add(time.Hour)}, time.Minute); !ok {
			t.Fatal("a claim whose lease ran out was not taken over")
		}
		if ok, err := s.RenewIdempotency(ctx, "k1", "o1", time.Minute); ok || err != nil {
			t.Fatalf("the dead owner renewed a claim taken over: %v %v", ok, err)
		}
		if _, ok, _ := s.ClaimIdempotency(ctx, &WebhookIdempotency{Key: "k1", Owner: "o3", ExpiresAt: time.Now().Add(time.Hour)}, time.Minute); ok {
			t.Fatal("a live claim was taken over")
		}
		if err := s.ReleaseIdempotency(ctx, "k1", "o2"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetIdempotency(ctx, "k1"); err != ErrNotFound {
			t.Fatalf("released: %v", err)
		}
	})
}

func TestDeliveryRecords(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		id := Delivery{ID: "dlv_1", Channel: "webhook", Source: "api", Target: "https://h.example/"}
		if err := s.CreateDelivery(ctx, &Delivery{ID: "dlv_1", Channel: "webhook", Source: "api"}); err != nil {
			t.Fatal(err)
		}
		for i, code := range []int{503, 503, 503} {
			r := AttemptRecord{Delivery: id, Attempt: i + 1, StatusCode: code, Error: "503"}
			if err := s.RecordAttempt(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		// A repeated recording of attempt 3 does not count twice.
		if err := s.RecordAttempt(ctx, AttemptRecord{Delivery: id, Attempt: 3, StatusCode: 503}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordAttempt(ctx, AttemptRecord{Delivery: id, Attempt: 4, StatusCode: 200, Delivered: true, Final: true}); err != nil {
			t.Fatal(err)
		}
		// A late failure never downgrades a delivered message.
		if err := s.FinishDelivery(ctx, "dlv_1", DeliveryFailed, "late"); err != nil {
			t.Fatal(err)
		}
		d, atts, err := s.GetDelivery(ctx, "dlv_1")
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != DeliveryDelivered || d.Attempts != 4 || len(atts) != 4 || d.DeliveredAt == nil || d.LastStatusCode != 200 {
			t.Fatalf("delivery %+v, %d attempts", d, len(atts))
		}
		// Attempts of a delivery nobody created (a child workflow) create it.
		if err := s.RecordAttempt(ctx, AttemptRecord{Delivery: Delivery{ID: "dlv_2", Channel: "webhook"}, Attempt: 1, StatusCode: 400, Final: true}); err != nil {
			t.Fatal(err)
		}
		st, err := s.ChannelStats(ctx, "webhook")
		if err != nil || st.Deliveries != 1 || st.Failures != 1 || st.Last == nil {
			t.Fatalf("stats %+v %v", st, err)
		}
	})
}

func TestHookCursorOnlyMovesForward(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		if _, found, _ := s.GetHookCursor(ctx, "h"); found {
			t.Fatal("cursor before any")
		}
		for _, id := range []int64{5, 9, 7} {
			if err := s.SetHookCursor(ctx, "h", id); err != nil {
				t.Fatal(err)
			}
		}
		if got, found, err := s.GetHookCursor(ctx, "h"); err != nil || !found || got != 9 {
			t.Fatalf("cursor %d %v %v", got, found, err)
		}
	})
}

func TestScheduleRuns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		t0 := time.Now().UTC().Add(-time.Minute)
		if err := s.SaveScheduleRun(ctx, &ScheduleRun{WorkflowID: "w1", AgentID: "a", Status: ScheduleRunSucceeded, StartedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishScheduleRun(ctx, ScheduleRun{WorkflowID: "w2", AgentID: "a", Status: ScheduleRunFailed, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		last, err := s.LastScheduleRuns(ctx, []string{"a", "b"})
		if err != nil || len(last) != 1 || last["a"].WorkflowID != "w2" || last["a"].Error != "boom" {
			t.Fatalf("last %+v %v", last, err)
		}
	})
}

// Two gateways on one database (issue 18 item 3): the live claim of the
// other gateway is respected; once its lease has run out (the process
// died) the claim is taken over, and the dead owner can neither renew nor
// complete it.
func TestIdempotencyClaimOfAnotherGateway(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		g1, g2 := mustOpen(t, opts), mustOpen(t, opts)
		claim := func(s *Store, owner string) (*WebhookIdempotency, bool) {
			t.Helper()
			have, ok, err := s.ClaimIdempotency(ctx, &WebhookIdempotency{Key: "shared", AgentID: "a", BodyHash: "h", Owner: owner,
				ExpiresAt: time.Now().Add(time.Hour)}, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			return have, ok
		}
		if _, ok := claim(g1, "g1-req"); !ok {
			t.Fatal("first claim refused")
		}
		have, ok := claim(g2, "g2-req")
		if ok || have.Owner != "g1-req" || have.Status != IdempotencyRunning || time.Until(have.LeaseUntil) <= 0 {
			t.Fatalf("the other gateway's live claim: %+v claimed=%v", have, ok)
		}
		if ok, err := g1.RenewIdempotency(ctx, "shared", "g1-req", 10*time.Second); !ok || err != nil {
			t.Fatalf("renew: %v %v", ok, err)
		}
		// g1 dies: its last renewal's lease runs out.
		if err := g2.DB.Model(&WebhookIdempotency{}).Where("idem_key = ?", "shared").
			Update("lease_until", time.Now().UTC().Add(-time.Second)).Error; err != nil {
			t.Fatal(err)
		}
		if _, ok := claim(g2, "g2-req"); !ok {
			t.Fatal("a claim whose lease ran out was not taken over")
		}
		if ok, err := g1.RenewIdempotency(ctx, "shared", "g1-req", 10*time.Second); ok || err != nil {
			t.Fatalf("the dead owner renewed the claim taken over: %v %v", ok, err)
		}
		if err := g1.CompleteIdempotency(ctx, "shared", "g1-req", `{"reply":"late"}`); err != nil {
			t.Fatal(err)
		}
		if err := g2.CompleteIdempotency(ctx, "shared", "g2-req", `{"reply":"g2"}`); err != nil {
			t.Fatal(err)
		}
		if have, ok := claim(g1, "g1-again"); ok || have.Status != IdempotencyDone || have.Response != `{"reply":"g2"}` {
			t.Fatalf("after takeover: %+v claimed=%v", have, ok)
		}
	})
}
