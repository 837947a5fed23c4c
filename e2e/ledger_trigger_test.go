package e2e

import (
	"testing"

	"github.com/agentryhq/agentry/models"
)

// Issue 43: the ledger's trigger of an inbound webhook answered
// synchronously is webhook (what started the run, as for its asynchronous
// runs), and a chat call's is api.
func TestLedgerTriggerOfSynchronousWebhookIsWebhook(t *testing.T) {
	g := webhookGateway(t)
	r := g.Do("POST", "/api/v1/webhooks/plain", `{"text":"hello"}`)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	var rows []models.LedgerEntry
	g.Store.DB.Where("run_id = ?", r.JSON["run_id"]).Find(&rows)
	if len(rows) == 0 {
		t.Fatalf("no ledger row for run %v", r.JSON["run_id"])
	}
	for _, row := range rows {
		if row.Source != "webhook" || row.Trigger != "webhook" {
			t.Errorf("webhook call's ledger row: source %q trigger %q, want webhook/webhook", row.Source, row.Trigger)
		}
	}

	c := g.Do("POST", "/api/v1/chat", `{"agent_id":"chatonly","text":"hi"}`)
	if c.Status != 200 {
		t.Fatalf("%d %s", c.Status, c.Raw)
	}
	rows = nil
	g.Store.DB.Where("run_id = ?", c.JSON["run_id"]).Find(&rows)
	if len(rows) == 0 || rows[0].Trigger != "api" || rows[0].Source != "chat" {
		t.Fatalf("chat call's ledger rows %+v, want source chat, trigger api", rows)
	}
}
