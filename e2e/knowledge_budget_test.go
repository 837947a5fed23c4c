package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestKnowledgeIngestionWaitsForBudget (issue 45, Show): a hard budget
// that runs out during an ingestion parks it (indexing, waiting for
// budget) without overshooting; raising the budget resumes it at once and
// the document becomes ready, each batch in the ledger once.
func TestKnowledgeIngestionWaitsForBudget(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "docs"), 0o755)
	var b strings.Builder
	for p := range 40 {
		fmt.Fprintf(&b, "Paragraph %d of the budget handbook: the %s rule applies to expense %d, approved by %s.\n\n", p, stationName(p), p*13, stationName(p+50))
	}
	os.WriteFile(filepath.Join(ws, "docs", "budget.md"), []byte(b.String()), 0o644)
	const budget = 0.17
	g := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Config: fmt.Sprintf(`
costs:
  enforcement_mode: hard
  daily_budget_usd: %v
  run_budget_wait: 1h
  pricing:
    ollama/nomic-embed-text: {input_per_mtok: 200, output_per_mtok: 0, source: test, version: t1, effective_date: "2024-01-01"}
knowledge:
  embedding: {provider: ollama, model: nomic-embed-text, batch_size: 4}
  chunking: {size: 400, overlap: 0}
  bases:
    docs: {sources: [docs]}
`, budget)})
	var doc map[string]any
	deadline := time.Now().Add(time.Minute)
	for {
		r := g.Do("GET", "/api/v1/knowledge/bases/docs/documents", nil)
		if r.Status == 200 && len(r.JSON["documents"].([]any)) == 1 {
			doc = r.JSON["documents"].([]any)[0].(map[string]any)
			if doc["waiting_for"] == "budget" || doc["status"] == "ready" || doc["status"] == "failed" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("document never waited for budget: %s", r.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if doc["status"] != "indexing" || doc["waiting_for"] != "budget" {
		t.Fatalf("document when the budget ran out: %v", doc)
	}
	spent := int64(0)
	for _, r := range ledger(t, g, "source=embedding") {
		spent += r.CostMicros
	}
	t.Logf("parked after %v of %v chunks embedded, %d micro-USD spent of a %v USD budget", doc["embedded"], doc["chunks"], spent, budget)
	if doc["embedded"] == float64(0) || doc["embedded"] == doc["chunks"] {
		t.Fatalf("the budget ran out at %v of %v chunks, want mid-ingestion", doc["embedded"], doc["chunks"])
	}
	if spent > int64(budget*1e6) {
		t.Fatalf("spent %d micro-USD, over the budget of %v USD", spent, budget)
	}
	if p := g.Do("PATCH", "/api/v1/config", map[string]any{"set": map[string]any{"costs.daily_budget_usd": 100}}); p.Status != 200 {
		t.Fatalf("raise the budget: %d %s", p.Status, p.Raw)
	}
	deadline = time.Now().Add(20 * time.Second) // the signal resumes it at once (its timer: 30 s)
	for {
		r := g.Do("GET", "/api/v1/knowledge/bases/docs/documents", nil)
		doc = r.JSON["documents"].([]any)[0].(map[string]any)
		if doc["status"] == "ready" || doc["status"] == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("document did not resume after the raise: %v", doc)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if doc["status"] != "ready" || doc["waiting_for"] != nil {
		t.Fatalf("document after the raise: %v", doc)
	}
	chunks := int(doc["chunks"].(float64))
	batches := map[string]bool{}
	for _, r := range ledger(t, g, "source=embedding") {
		if strings.HasPrefix(r.CallID, "knowledge-") {
			if batches[r.CallID] || r.Outcome != "succeeded" {
				t.Fatalf("ledger row %+v", r)
			}
			batches[r.CallID] = true
		}
	}
	if len(batches) != (chunks+3)/4 {
		t.Fatalf("%d batches in the ledger, want %d", len(batches), (chunks+3)/4)
	}
}
