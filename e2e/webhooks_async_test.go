package e2e

import (
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/models"
)

// ?async=true answers 202 with a run id at once; the run goes on as a
// durable WebhookRun; its reply is read from the run's path, joins the
// thread's session, and is delivered to the agent's reply channel once.
func TestWebhookAsyncRunReplyIsReadLaterAndDelivered(t *testing.T) {
	rcv := newSigReceiver(t, "async-secret")
	g := gatewaytest.Start(t, gatewaytest.Options{
		Config: deliveryConfig(rcv.URL(), "async-secret", ""),
		Agents: map[string]string{
			"ops.yaml":  webhookAgents + "  reply_output: {channel: webhook}\n",
			"bare.yaml": "id: bare\ntrigger: webhook\n",
			"chat.yaml": "id: chatonly\n",
		},
	})
	payload := `{"alert":{"id":"A-9","summary":"Disk 95% on db1"},"sender":{"login":"ana"}}`
	status, acc, _ := postWithKey(t, g, "ops?async=true", "", payload)
	if status != 202 || acc["status"] != "queued" || acc["session_id"] != "webhook-ops-A-9" || acc["thread_id"] != "A-9" || acc["user_id"] != "ana" {
		t.Fatalf("async: %d %v", status, acc)
	}
	runID, _ := acc["run_id"].(string)
	path, _ := acc["reply_path"].(string)
	if runID == "" || path != "/api/v1/webhooks/ops/runs/"+runID {
		t.Fatalf("run id %q path %q", runID, path)
	}
	var run gatewaytest.Response
	waitUntil(t, 60*time.Second, "the async run to finish", func() bool {
		run = g.Do("GET", path, nil)
		return run.Status == 200 && (run.JSON["status"] == "succeeded" || run.JSON["status"] == "failed")
	})
	if run.JSON["status"] != "succeeded" || run.JSON["reply"] != "echo: Disk 95% on db1" || run.JSON["response_id"] == "" {
		t.Fatalf("run %s", run.Raw)
	}
	// Delivered once, under the id on the run.
	waitUntil(t, 30*time.Second, "the reply's delivery", func() bool {
		_, acc, _, _, _ := rcv.snapshot()
		return len(acc) == 1
	})
	_, _, bodies, _, _ := rcv.snapshot()
	if len(bodies) != 1 || bodies[0]["text"] != "echo: Disk 95% on db1" || bodies[0]["delivery_id"] != run.JSON["delivery_id"] || bodies[0]["source"] != "webhook" {
		t.Fatalf("deliveries %v (run %s)", bodies, run.Raw)
	}
	// The exchange joined the thread's session: a synchronous call on the
	// same thread sends it as history.
	if r := g.Do("POST", "/api/v1/webhooks/ops", `{"alert":{"id":"A-9","summary":"now 99%"},"sender":{"login":"ana"}}`); r.Status != 200 {
		t.Fatalf("sync follow-up: %d %s", r.Status, r.Raw)
	}
	calls := g.Fake.Calls()
	if last := calls[len(calls)-1]; last.MessageCount < 3 {
		t.Fatalf("follow-up sent %d messages; the async exchange is not in the session", last.MessageCount)
	}
	var ledger []models.LedgerEntry
	g.Store.DB.Where("run_id = ?", runID).Find(&ledger)
	if len(ledger) != 1 || ledger[0].Source != "webhook" || ledger[0].Trigger != "webhook" {
		t.Fatalf("ledger of the async run %+v", ledger)
	}

	// An Idempotency-Key names one run: the repeat gets the same run id and
	// the provider is not called again.
	_, a1, _ := postWithKey(t, g, "bare?async=true", "evt-async-1", `{"text":"once"}`)
	waitUntil(t, 60*time.Second, "the keyed run", func() bool {
		r := g.Do("GET", "/api/v1/webhooks/bare/runs/"+a1["run_id"].(string), nil)
		return r.JSON["status"] == "succeeded"
	})
	before := g.Fake.CallCount()
	st, a2, _ := postWithKey(t, g, "bare?async=true", "evt-async-1", `{"text":"once"}`)
	if st != 202 || a2["run_id"] != a1["run_id"] || a2["status"] != "succeeded" || g.Fake.CallCount() != before {
		t.Fatalf("repeat: %d %v (first %v), provider calls %d -> %d", st, a2, a1, before, g.Fake.CallCount())
	}

	// Bad input: unknown run, a run read under another agent, a non-webhook
	// agent, a body that is not JSON; nothing starts.
	before = g.Fake.CallCount()
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/api/v1/webhooks/ops/runs/wr_nope", nil, 404},
		{"GET", "/api/v1/webhooks/bare/runs/" + runID, nil, 404},
		{"POST", "/api/v1/webhooks/chatonly?async=true", `{"text":"x"}`, 404},
		{"POST", "/api/v1/webhooks/bare?async=true", `not json`, 400},
	} {
		if r := g.Do(c.method, c.path, c.body); r.Status != c.want || r.JSON["error"] == nil {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, r.Status, r.Raw, c.want)
		}
	}
	if r := g.DoAs("", "GET", path, nil); r.Status != 401 {
		t.Errorf("unauthenticated read: %d", r.Status)
	}
	time.Sleep(300 * time.Millisecond)
	if n := g.Fake.CallCount(); n != before {
		t.Errorf("refused requests reached the provider (%d calls)", n-before)
	}
}
