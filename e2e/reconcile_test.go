package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeexport"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/models"
)

// Reconciliation end to end: the real gateway on the shared embedded
// Temporal, the Schedule firing every 2 s, the fake export APIs in both
// providers' shapes, an event hook receiving costs.variance.

const reconcileAdminKey = "sk-admin-e2e-SECRET-5f2b9c0d7e1a"

func reconcileConfig(exportURL, openaiEnv, interval string) string {
	return fmt.Sprintf(`
costs:
  reconciliation:
    enabled: true
    interval: %s
    variance_alert_threshold: 0.05
    providers:
      openai: {type: openai, base_url: %q, api_key_env: %s, organization: org-test}
      anthropic: {type: anthropic, base_url: %q, api_key_env: AGENTRY_TEST_ANTHROPIC_ADMIN}
`, interval, exportURL+"/v1", openaiEnv, exportURL)
}

type reconStatus struct {
	Status         string   `json:"status"`
	Problems       []string `json:"problems"`
	Reconciliation struct {
		Status      string   `json:"status"`
		Day         string   `json:"day"`
		MissingKeys []string `json:"missing_keys"`
		LastRun     *struct {
			ID      string `json:"id"`
			Trigger string `json:"trigger"`
		} `json:"last_run"`
		Providers []struct {
			Provider           string `json:"provider"`
			ProviderCostMicros int64  `json:"provider_cost_micros"`
			LedgerCostMicros   int64  `json:"ledger_cost_micros"`
			Alert              bool   `json:"alert"`
		} `json:"providers"`
	} `json:"reconciliation"`
}

func reconStatusOf(t *testing.T, g *gatewaytest.Gateway) reconStatus {
	t.Helper()
	r := g.Do("GET", "/api/v1/costs/status", nil)
	if r.Status != 200 {
		t.Fatalf("status: %d %s", r.Status, r.Raw)
	}
	var st reconStatus
	if err := json.Unmarshal(r.Raw, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// runDay starts a reconciliation of day and waits for its end.
func runDay(t *testing.T, g *gatewaytest.Gateway, day string) map[string]any {
	t.Helper()
	r := g.Do("POST", "/api/v1/costs/reconciliation/run", map[string]string{"day": day})
	if r.Status != 202 {
		t.Fatalf("run: %d %s", r.Status, r.Raw)
	}
	id := r.JSON["run_id"].(string)
	var run map[string]any
	waitUntil(t, 60*time.Second, "the run to end", func() bool {
		rr := g.Do("GET", "/api/v1/costs/reconciliation/runs/"+id, nil)
		run = rr.JSON
		return rr.Status == 200 && run["status"] != "running"
	})
	return run
}

func TestReconciliationScheduleVarianceHookAndIdempotence(t *testing.T) {
	t.Setenv("AGENTRY_TEST_OPENAI_ADMIN", reconcileAdminKey)
	t.Setenv("AGENTRY_TEST_ANTHROPIC_ADMIN", reconcileAdminKey)
	t.Setenv("AGENTRY_TEST_HOOK_SECRET", "hook-secret-r")
	exp := fakeexport.New(reconcileAdminKey)
	exp.PageSize = 1 // every import spans pages
	if err := exp.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exp.Close)
	now := time.Now().UTC()
	yesterday := now.AddDate(0, 0, -1).Format(time.DateOnly)
	before := now.AddDate(0, 0, -2).Format(time.DateOnly)
	for _, day := range []string{yesterday, before} {
		// OpenAI billed $1.00 for gpt-4o-mini; the ledger will hold $0.50.
		exp.AddCost(day,
			fakeexport.Line{Provider: "openai", Model: "gpt-4o-mini-2024-07-18", LineItem: "gpt-4o-mini-2024-07-18, input", USD: 0.40},
			fakeexport.Line{Provider: "openai", Model: "gpt-4o-mini-2024-07-18", LineItem: "gpt-4o-mini-2024-07-18, output", USD: 0.60},
			fakeexport.Line{Provider: "anthropic", Model: "claude-3-5-haiku", LineItem: "Claude 3.5 Haiku Usage - Input Tokens", USD: 0.02},
		)
		exp.AddUsage(day, fakeexport.Usage{Provider: "openai", Model: "gpt-4o-mini-2024-07-18", InputTokens: 100, OutputTokens: 50, Requests: 2},
			fakeexport.Usage{Provider: "anthropic", Model: "claude-3-5-haiku", InputTokens: 10, OutputTokens: 5})
	}
	rcv := newSigReceiver(t, "hook-secret-r")
	g := gatewaytest.Start(t, gatewaytest.Options{Config: reconcileConfig(exp.URL(), "AGENTRY_TEST_OPENAI_ADMIN", "2s") + fmt.Sprintf(`
runtime:
  ssrf: {enabled: true, allow_loopback: true}
  delivery: {initial_interval: 100ms, max_interval: 400ms, retry_for: 1m, attempt_timeout: 5s}
hooks:
  - on: ["costs.variance"]
    url: %q
    secret_env: AGENTRY_TEST_HOOK_SECRET
`, rcv.URL())})
	// The ledger of both days: openai half the bill, anthropic exact.
	for _, day := range []string{yesterday, before} {
		d, _ := time.Parse(time.DateOnly, day)
		for i, row := range []models.LedgerEntry{
			{Provider: "openai", Model: "gpt-4o-mini", CostMicros: 500_000},
			{Provider: "anthropic", Model: "claude-3-5-haiku", CostMicros: 20_000},
		} {
			row.CallID = fmt.Sprintf("recon-%s-%d", day, i)
			row.Subject, row.Source, row.Outcome, row.PricingStatus = "admin", "chat", models.OutcomeSucceeded, models.PricingPriced
			row.CreatedAt, row.StartedAt, row.UpdatedAt = d.Add(time.Hour), d.Add(time.Hour), d.Add(time.Hour)
			if err := g.Store.DB.Create(&row).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntil(t, 10*time.Second, "the hook's cursor", func() bool {
		var n int64
		g.Store.DB.Model(&models.HookCursor{}).Count(&n)
		return n == 1
	})

	// The Schedule fires by itself and reconciles yesterday.
	var st reconStatus
	waitUntil(t, 90*time.Second, "a scheduled run to succeed", func() bool {
		st = reconStatusOf(t, g)
		return st.Reconciliation.Status == "succeeded" && st.Reconciliation.LastRun != nil && st.Reconciliation.LastRun.Trigger == "schedule"
	})
	if st.Status != "degraded" || st.Reconciliation.Day != yesterday {
		t.Fatalf("status %+v", st)
	}
	problem := strings.Join(st.Problems, "\n")
	if !strings.Contains(problem, "openai billed $1.000000 for "+yesterday) || !strings.Contains(problem, "$0.500000") {
		t.Fatalf("problems: %v", st.Problems)
	}
	for _, p := range st.Reconciliation.Providers {
		if (p.Provider == "openai") != p.Alert {
			t.Fatalf("providers: %+v", st.Reconciliation.Providers)
		}
	}
	// The hook delivered costs.variance.
	waitUntil(t, 30*time.Second, "the costs.variance hook delivery", func() bool { _, acc, _, _, _ := rcv.snapshot(); return len(acc) >= 1 })
	_, _, bodies, _, _ := rcv.snapshot()
	ev := bodies[0]["event"].(map[string]any)
	payload := ev["payload"].(map[string]any)
	if bodies[0]["type"] != "costs.variance" || payload["provider"] != "openai" || payload["variance_micros"] != float64(500_000) {
		t.Fatalf("hook body %v", bodies[0])
	}

	// The day before, on demand, twice: the same rows, never added.
	countDay := func(day string) int64 {
		var n int64
		g.Store.DB.Model(&models.ProviderUsageLine{}).Where("day = ?", day).Count(&n)
		return n
	}
	run1 := runDay(t, g, before)
	n1 := countDay(before)
	run2 := runDay(t, g, before)
	n2 := countDay(before)
	if run1["status"] != "succeeded" || run2["status"] != "succeeded" || n1 != 5 || n2 != n1 {
		t.Fatalf("runs %v / %v, rows %d then %d", run1["status"], run2["status"], n1, n2)
	}
	// The scheduled runs re-imported yesterday many times by now: still one set.
	if n := countDay(yesterday); n != 5 {
		t.Fatalf("yesterday has %d rows", n)
	}

	// Bad input changes nothing.
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"day": "2026-13-01"}`, 400},
		{fmt.Sprintf(`{"day": %q}`, now.Format(time.DateOnly)), 400},
		{`{"day": 5}`, 400},
		{`not json`, 400},
	} {
		if r := g.Do("POST", "/api/v1/costs/reconciliation/run", tc.body); r.Status != tc.code || r.JSON["error"] == nil {
			t.Fatalf("%s: %d %s", tc.body, r.Status, r.Raw)
		}
	}
	if r := g.Do("GET", "/api/v1/costs/reconciliation/runs/nope", nil); r.Status != 404 {
		t.Fatalf("unknown run: %d", r.Status)
	}

	// The admin key is nowhere: logs, the application database, Temporal history.
	scanForKey(t, g, reconcileAdminKey)
}

// scanForKey fails when secret appears in the gateway's logs, its SQLite
// file, the shared Temporal server's SQLite files or the history of any
// reconciliation workflow the gateway ran.
func scanForKey(t *testing.T, g *gatewaytest.Gateway, secret string) {
	t.Helper()
	if strings.Contains(strings.Join(g.Logs.Tail(100000), "\n"), secret) {
		t.Fatal("the admin key is in the logs")
	}
	files, _ := filepath.Glob(filepath.Join(g.Workspace, "*", "*.db*"))
	appFiles := len(files)
	temporalFiles, _ := filepath.Glob(filepath.Join(os.TempDir(), "agentry-temporal-*", "*.db*"))
	files = append(files, temporalFiles...)
	if appFiles == 0 || len(temporalFiles) == 0 {
		t.Fatalf("SQLite files to scan: %d of the gateway, %d of Temporal", appFiles, len(temporalFiles))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // another test's server removed its files meanwhile
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("the admin key is in %s", f)
		}
	}
	var runs []models.ReconciliationRun
	if err := g.Store.DB.Find(&runs).Error; err != nil || len(runs) == 0 {
		t.Fatalf("no reconciliation run to scan (%v)", err)
	}
	ctx := t.Context()
	for _, r := range runs {
		h := g.Temporal.GetWorkflowHistory(ctx, r.WorkflowID, r.ID, false, 0)
		events := 0
		for h.HasNext() {
			e, err := h.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if strings.Contains(e.String(), secret) {
				t.Fatalf("the admin key is in the history of %s", r.WorkflowID)
			}
		}
		if events == 0 {
			t.Fatalf("empty history of %s", r.WorkflowID)
		}
	}
}

// A missing admin key variable: the status names it, the run fails at once
// and no request reaches the export API.
func TestReconciliationMissingKeyVariable(t *testing.T) {
	os.Unsetenv("AGENTRY_TEST_UNSET_ADMIN")
	t.Setenv("AGENTRY_TEST_ANTHROPIC_ADMIN", "")
	exp := fakeexport.New(reconcileAdminKey)
	if err := exp.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exp.Close)
	g := gatewaytest.Start(t, gatewaytest.Options{Config: reconcileConfig(exp.URL(), "AGENTRY_TEST_UNSET_ADMIN", "1h")})
	st := reconStatusOf(t, g)
	if st.Status != "degraded" || st.Reconciliation.Status != "misconfigured" || len(st.Reconciliation.MissingKeys) != 2 ||
		!strings.Contains(strings.Join(st.Problems, "\n"), "environment variable AGENTRY_TEST_UNSET_ADMIN is not set") {
		t.Fatalf("status %+v", st)
	}
	run := runDay(t, g, time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly))
	if run["status"] != "failed" || !strings.Contains(fmt.Sprint(run["error"]), "AGENTRY_TEST_ANTHROPIC_ADMIN") {
		t.Fatalf("run %v", run)
	}
	if n := exp.Requests(); n != 0 {
		t.Fatalf("%d requests reached the export API", n)
	}
}
