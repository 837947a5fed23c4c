package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestFullDiskCostsKeepReportedUsage (#42 item 6): a chat call the provider
// answered, with its usage, while the database's disk filled up. The caller
// gets 507 (the exchange could not be stored), but once space returns the
// call's ledger row holds the usage the provider reported and its cost,
// not the reserved worst case. Before, the settlement was dropped and the
// reaper charged the call 10,000 micros (100 output tokens at $100 per
// million) for 7 tokens served.
func TestFullDiskCostsKeepReportedUsage(t *testing.T) {
	disk := mountSmallTmpfs(t, "8m")
	fake := startFake(t)
	fake.Script(fakellm.Rule{Contains: "answered on a full disk", Reply: "served", Delay: fakellm.Duration(5 * time.Second),
		Usage: &fakellm.Usage{InputTokens: 50, OutputTokens: 7}})
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: map[string]string{"exact.yaml": exactAgent},
		Config: "storage: {backend: sqlite, dsn: " + filepath.Join(disk, "agentry.db") + "}\n" + `
llm:
  default_provider: openai
  providers:
    openai: {type: openai, base_url: "` + fake.OpenAIBaseURL() + `", default_model: exact}
costs:
  enforcement_mode: hard
  daily_budget_usd: 1.00
  reservation_ttl: 4s
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`})

	answered := make(chan gatewaytest.Response, 1)
	go func() {
		answered <- g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "exact", "text": "answered on a full disk"})
	}()
	// Admitted and at the provider: now the disk fills.
	deadline := time.Now().Add(10 * time.Second)
	for fake.CallCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call never reached the provider")
		}
		time.Sleep(20 * time.Millisecond)
	}
	filler := filepath.Join(disk, "filler")
	fillDisk(t, filler)
	desc := strings.Repeat("x", 16<<10)
	for i := 0; i < 400; i++ {
		if r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "disk filler", "description": desc}); r.Status != 201 {
			if r.Status != 507 {
				t.Fatalf("filler write: %d %s", r.Status, r.Raw)
			}
			break
		}
	}
	r := <-answered
	if r.Status != 507 {
		t.Fatalf("the answered call on a full disk: want 507, got %d %s", r.Status, r.Raw)
	}

	// Space returns (longer than reservation_ttl later: the reaper has had
	// its chance at the worst case).
	time.Sleep(5 * time.Second)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Outcome                   string
		InputTokens, OutputTokens int64
		CostMicros                int64
		UsageEstimated            bool
		PricingStatus             string
	}
	var got row
	deadline = time.Now().Add(60 * time.Second)
	for {
		got = row{}
		err := g.Store.DB.Table("cost_ledger").Select("outcome, input_tokens, output_tokens, cost_micros, usage_estimated, pricing_status").
			Where("agent_id = ?", "exact").Take(&got).Error
		if err == nil && got.Outcome == "succeeded" && got.OutputTokens == 7 && got.CostMicros == 700 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger row after space returned: %+v (err %v); want outcome succeeded, 50/7 tokens, 700 micros", got, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got.InputTokens != 50 || got.UsageEstimated || got.PricingStatus != "priced" {
		t.Fatalf("ledger row: %+v", got)
	}
	var reserved int64
	g.Store.DB.Table("cost_reservations").Count(&reserved)
	if reserved != 0 {
		t.Fatalf("%d reservations left", reserved)
	}
}
