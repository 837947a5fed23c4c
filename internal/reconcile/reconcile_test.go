package reconcile

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeexport"
	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const adminKey = "sk-admin-test-0123456789abcdef"

type events struct{ got []*models.Event }

func (e *events) Publish(_ context.Context, ev *models.Event) (bool, error) {
	e.got = append(e.got, ev)
	return true, nil
}

func openStore(t testing.TB, postgres bool) *models.Store {
	t.Helper()
	opts := models.Options{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "agentry.db")}
	if postgres {
		opts = models.Options{Driver: "postgres", DSN: testenv.Postgres(t)}
	}
	st, err := models.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func setup(t testing.TB, postgres bool) (*Service, *fakeexport.Server, *events) {
	t.Helper()
	f := fakeexport.New(adminKey)
	f.PageSize = 2 // every import spans pages
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	ev := &events{}
	svc := &Service{
		Config: &config.ReconciliationConfig{Enabled: true, VarianceAlertThreshold: 0.05, Providers: map[string]config.ReconciliationProviderConfig{
			"openai":    {Type: "openai", BaseURL: f.URL() + "/v1", APIKeyEnv: "OPENAI_ADMIN_KEY", Organization: "org-1"},
			"anthropic": {Type: "anthropic", BaseURL: f.URL(), APIKeyEnv: "ANTHROPIC_ADMIN_KEY"},
		}},
		Store:  openStore(t, postgres),
		Events: ev,
		Getenv: func(k string) string {
			if strings.HasSuffix(k, "_ADMIN_KEY") {
				return adminKey
			}
			return ""
		},
	}
	return svc, f, ev
}

// ledgerCall writes a settled ledger row.
func ledgerCall(t testing.TB, st models.ReconcileStore, id, provider, model string, at time.Time, micros int64) {
	t.Helper()
	e := models.LedgerEntry{CallID: id, Subject: "admin", Source: "chat", Provider: provider, Model: model, Outcome: models.OutcomeSucceeded,
		PricingStatus: models.PricingPriced, CostMicros: micros, CreatedAt: at, StartedAt: at, UpdatedAt: at}
	if err := st.(*models.Store).DB.Create(&e).Error; err != nil {
		t.Fatal(err)
	}
}

func runDay(t *testing.T, svc *Service, runID, day string) (CompareResult, error) {
	t.Helper()
	ctx := context.Background()
	ids, err := svc.Begin(ctx, RunRef{RunID: runID, WorkflowID: "wf-" + runID, Day: day, Trigger: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := svc.Import(ctx, runID, id, day); err != nil {
			return CompareResult{}, err
		}
	}
	return svc.Compare(ctx, runID)
}

func TestImportBothProvidersVarianceAndIdempotence(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			svc, f, ev := setup(t, pg)
			day := "2026-03-04"
			d, _ := ParseDay(day)
			f.AddCost(day,
				fakeexport.Line{Provider: "openai", Model: "gpt-4o-mini-2024-07-18", LineItem: "gpt-4o-mini-2024-07-18, input", USD: 0.50},
				fakeexport.Line{Provider: "openai", Model: "gpt-4o-mini-2024-07-18", LineItem: "gpt-4o-mini-2024-07-18, output", USD: 0.25},
				fakeexport.Line{Provider: "anthropic", Model: "claude-3-5-haiku", LineItem: "Claude 3.5 Haiku Usage - Input Tokens", USD: 1.2345},
			)
			f.AddCost("2026-03-05", fakeexport.Line{Provider: "openai", Model: "gpt-4o", LineItem: "gpt-4o, input", USD: 99}) // another day
			f.AddUsage(day, fakeexport.Usage{Provider: "openai", Model: "gpt-4o-mini-2024-07-18", InputTokens: 1000, CachedInputTokens: 200, OutputTokens: 300, Requests: 7})
			// Ledger: openai matches the bill to the micro-dollar; anthropic recorded far less.
			ledgerCall(t, svc.Store, "c1", "openai", "gpt-4o-mini", d.Add(time.Hour), 500_000)
			ledgerCall(t, svc.Store, "c2", "openai", "gpt-4o-mini", d.Add(2*time.Hour), 250_000)
			ledgerCall(t, svc.Store, "c3", "anthropic", "claude-3-5-haiku", d.Add(3*time.Hour), 10_000)
			ledgerCall(t, svc.Store, "c4", "openai", "gpt-4o-mini", d.AddDate(0, 0, 1), 777) // next day: not compared

			res, err := runDay(t, svc, "run-1", day)
			if err != nil {
				t.Fatal(err)
			}
			run, err := svc.Store.GetReconciliationRun(context.Background(), "run-1")
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != models.ReconcileSucceeded || len(run.Providers) != 2 {
				t.Fatalf("run: %+v", run)
			}
			byID := map[string]models.ProviderReconciliation{}
			for _, p := range run.Providers {
				byID[p.Provider] = p
			}
			oa, an := byID["openai"], byID["anthropic"]
			if oa.ProviderMicros != 750_000 || oa.LedgerMicros != 750_000 || oa.VarianceMicros != 0 || oa.Alert || oa.Pages < 2 {
				t.Fatalf("openai: %+v", oa)
			}
			// 123.45 cents = $1.2345.
			if an.ProviderMicros != 1_234_500 || an.LedgerMicros != 10_000 || an.VarianceMicros != 1_224_500 || !an.Alert {
				t.Fatalf("anthropic: %+v", an)
			}
			if len(res.Alerts) != 1 || !strings.Contains(res.Alerts[0], "anthropic") || !strings.Contains(res.Alerts[0], day) {
				t.Fatalf("alerts: %v", res.Alerts)
			}
			if len(ev.got) != 1 || ev.got[0].Type != VarianceEventType || !strings.Contains(ev.got[0].Payload, `"provider":"anthropic"`) {
				t.Fatalf("events: %+v", ev.got)
			}
			lines, _ := svc.Store.ProviderUsage(context.Background(), "openai", day)
			if len(lines) != 3 { // two cost line items + usage
				t.Fatalf("openai lines: %+v", lines)
			}

			// The same day again: replaced, never added.
			before := countLines(t, svc.Store)
			if _, err := runDay(t, svc, "run-2", day); err != nil {
				t.Fatal(err)
			}
			if after := countLines(t, svc.Store); after != before {
				t.Fatalf("re-import changed the line count: %d -> %d", before, after)
			}
			run2, _ := svc.Store.GetReconciliationRun(context.Background(), "run-2")
			if run2.Providers[1].ProviderMicros != 750_000 {
				t.Fatalf("second run: %+v", run2.Providers)
			}

			// Status reports the last run and the alert.
			var st costs.ReconciliationStatus
			problems, err := svc.Report(context.Background(), &st)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != models.ReconcileSucceeded || st.Day != day || st.Variance == nil || len(st.Providers) != 2 || len(problems) != 1 {
				t.Fatalf("status: %+v problems %v", st, problems)
			}
		})
	}
}

func countLines(t *testing.T, st models.ReconcileStore) int64 {
	var n int64
	if err := st.(*models.Store).DB.Model(&models.ProviderUsageLine{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMissingKeyVariableSendsNothing(t *testing.T) {
	svc, f, _ := setup(t, false)
	svc.Getenv = func(string) string { return "" }
	_, err := runDay(t, svc, "run-1", "2026-03-04")
	if !errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), "ANTHROPIC_ADMIN_KEY") {
		t.Fatalf("err: %v", err)
	}
	if f.Requests() != 0 {
		t.Fatalf("%d requests sent without a key", f.Requests())
	}
	var st costs.ReconciliationStatus
	problems, _ := svc.Report(context.Background(), &st)
	if st.Status != "misconfigured" || len(st.MissingKeys) != 2 || !strings.Contains(strings.Join(problems, "\n"), "OPENAI_ADMIN_KEY is not set") {
		t.Fatalf("status %+v problems %v", st, problems)
	}
}

func TestExportFailuresStoreNothingAndNeverTheKey(t *testing.T) {
	day := "2026-03-04"
	cases := []fakeexport.Failure{
		{Status: 401, Body: "invalid key " + adminKey},
		{Status: 429},
		{Status: 500},
		{Malformed: true},
	}
	for _, fail := range cases {
		svc, f, _ := setup(t, false)
		f.AddCost(day, fakeexport.Line{Model: "m", LineItem: "m, input", USD: 1})
		f.PageSize = 0
		// The first page succeeds; the usage request fails: nothing of the
		// provider may be stored.
		f.Fail(fakeexport.Failure{}, fail)
		ctx := context.Background()
		if _, err := svc.Begin(ctx, RunRef{RunID: "r", Day: day}); err != nil {
			t.Fatal(err)
		}
		_, err := svc.Import(ctx, "r", "anthropic", day)
		if err == nil {
			t.Fatalf("%+v: no error", fail)
		}
		if strings.Contains(err.Error(), adminKey) {
			t.Fatalf("error carries the key: %v", err)
		}
		if n := countLines(t, svc.Store); n != 0 {
			t.Fatalf("%+v: %d lines stored", fail, n)
		}
		run, _ := svc.Store.GetReconciliationRun(ctx, "r")
		if run.Status != models.ReconcileFailed || run.Error == "" || strings.Contains(run.ProvidersJSON+run.Error, adminKey) {
			t.Fatalf("%+v: run %+v", fail, run)
		}
		var st costs.ReconciliationStatus
		problems, _ := svc.Report(ctx, &st)
		if st.Status != models.ReconcileFailed || !strings.Contains(strings.Join(problems, "\n"), "failed") {
			t.Fatalf("status %+v problems %v", st, problems)
		}
	}
}
