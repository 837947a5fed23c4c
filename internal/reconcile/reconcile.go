// Package reconcile compares the cost ledger with what the providers bill
// (spec cost rule 12): it imports each configured provider's usage and cost
// export for one UTC day (OpenAI organization Costs and Usage APIs,
// Anthropic Admin API cost and messages usage reports), stores it
// idempotently (one row per provider, day, model and line item), and
// computes the variance per provider, model and day, provider cost - ledger
// cost, stored with the run. Variance above variance_alert_threshold is an
// alert: a problem in GET /costs/status and a costs.variance event.
//
// The admin key of a provider is read from the environment variable named
// by api_key_env at the moment of the request, and never leaves the
// request: it is not passed in Temporal inputs or results, not stored, not
// logged, and export error texts are scrubbed of it.
//
// The Reconcile workflow (workflows/reconcile.go) drives the steps below
// as activities; this package holds the steps.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

// VarianceEventType is the event published when a day's variance of a
// provider exceeds variance_alert_threshold.
const VarianceEventType = "costs.variance"

// Errors the activities classify for Temporal's retry policy.
var (
	// ErrMissingKey: the api_key_env variable is empty or unset; no request
	// is sent (retrying cannot help until the operator sets it).
	ErrMissingKey = errors.New("admin key variable not set")
	// ErrConfig: the provider entry cannot be used (unknown type or id).
	ErrConfig = errors.New("reconciliation provider misconfigured")
	// ErrNotConfigured: costs.reconciliation.providers is empty (409).
	ErrNotConfigured = fault.Conflict("not_configured",
		"no provider is configured under costs.reconciliation.providers; add one (type, base_url, api_key_env) to run reconciliation")
	// ErrInvalidDay: a day that is not YYYY-MM-DD or not yet complete; the
	// errors of CheckDay are instances of it (400 on field day).
	ErrInvalidDay = errors.New("invalid day")
)

// Publisher is the event stream.
type Publisher interface {
	Publish(ctx context.Context, ev *models.Event) (bool, error)
}

// Service imports exports and compares them with the ledger.
type Service struct {
	Config *config.ReconciliationConfig
	Store  models.ReconcileStore
	Events Publisher
	Log    *slog.Logger
	// HTTP is the client for the export APIs (default: 60 s timeout).
	HTTP *http.Client
	// Getenv reads the admin key variables (default os.Getenv).
	Getenv func(string) string
}

func (s *Service) getenv(k string) string {
	if s.Getenv != nil {
		return s.Getenv(k)
	}
	return os.Getenv(k)
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Providers are the configured provider ids, sorted.
func (s *Service) Providers() []string {
	ids := make([]string, 0, len(s.Config.Providers))
	for id := range s.Config.Providers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// MissingKeys names, per provider, the api_key_env variable that is unset
// ("" entries are left out): "costs.reconciliation.providers.openai.api_key_env:
// environment variable OPENAI_ADMIN_KEY is not set".
func (s *Service) MissingKeys() []string {
	var out []string
	for _, id := range s.Providers() {
		if err := s.keyProblem(id); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

func (s *Service) keyProblem(id string) error {
	pc := s.Config.Providers[id]
	if pc.APIKeyEnv == "" {
		return fmt.Errorf("costs.reconciliation.providers.%s.api_key_env is not set (name the environment variable holding the admin key): %w", id, ErrMissingKey)
	}
	if s.getenv(pc.APIKeyEnv) == "" {
		return fmt.Errorf("costs.reconciliation.providers.%s.api_key_env: environment variable %s is not set: %w", id, pc.APIKeyEnv, ErrMissingKey)
	}
	return nil
}

// ParseDay reads a YYYY-MM-DD UTC day.
func ParseDay(day string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return time.Time{}, fmt.Errorf("day %q is not a date (YYYY-MM-DD)", day)
	}
	return t.UTC(), nil
}

// CheckDay accepts a YYYY-MM-DD day that is over (before today, UTC, at
// now): a day still running has no complete export yet.
func CheckDay(day string, now time.Time) error {
	d, err := ParseDay(day)
	if err != nil {
		return invalidDay(err.Error())
	}
	if !d.Before(now.UTC().Truncate(24 * time.Hour)) {
		return invalidDay(fmt.Sprintf("%s is not a completed UTC day (the latest is %s)", day, PreviousDay(now)))
	}
	return nil
}

// invalidDay is a bad day (400 on field day); errors.Is(err, ErrInvalidDay)
// holds.
func invalidDay(msg string) error {
	return &fault.Error{Kind: fault.KindInvalid, Code: fault.CodeInvalid, Field: "day", Msg: msg, Err: ErrInvalidDay}
}

// PreviousDay is the last completed UTC day at now.
func PreviousDay(now time.Time) string {
	return now.UTC().AddDate(0, 0, -1).Format(time.DateOnly)
}

// RunRef names a run.
type RunRef struct {
	RunID      string `json:"run_id"`
	WorkflowID string `json:"workflow_id"`
	Day        string `json:"day"`
	Trigger    string `json:"trigger"`
}

// Begin records the run as running (idempotent: a run already recorded is
// left as it is) and returns the provider ids to import.
func (s *Service) Begin(ctx context.Context, ref RunRef) ([]string, error) {
	if _, err := ParseDay(ref.Day); err != nil {
		return nil, err
	}
	ids := s.Providers()
	if _, err := s.Store.GetReconciliationRun(ctx, ref.RunID); err == nil {
		return ids, nil
	} else if !errors.Is(err, models.ErrNotFound) {
		return nil, err
	}
	run := &models.ReconciliationRun{ID: ref.RunID, WorkflowID: ref.WorkflowID, Day: ref.Day, Trigger: ref.Trigger,
		Status: models.ReconcileRunning, StartedAt: time.Now().UTC()}
	for _, id := range ids {
		run.Providers = append(run.Providers, models.ProviderReconciliation{Provider: id, Type: s.Config.Providers[id].Type, Status: "pending"})
	}
	return ids, s.Store.SaveReconciliationRun(ctx, run)
}

// update changes one provider's entry of a run (and the run) and saves it.
func (s *Service) update(ctx context.Context, runID, provider string, fn func(*models.ReconciliationRun, *models.ProviderReconciliation)) error {
	run, err := s.Store.GetReconciliationRun(ctx, runID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(run.Providers, func(p models.ProviderReconciliation) bool { return p.Provider == provider })
	if i < 0 {
		run.Providers = append(run.Providers, models.ProviderReconciliation{Provider: provider})
		i = len(run.Providers) - 1
	}
	fn(run, &run.Providers[i])
	return s.Store.SaveReconciliationRun(ctx, run)
}

// ImportResult is what one provider's import stored.
type ImportResult struct {
	Provider string `json:"provider"`
	Rows     int    `json:"rows"`
	Pages    int    `json:"pages"`
}

// Import reads one provider's export of the run's day and stores it whole
// (or, on any error, nothing), recording progress and errors on the run.
// Errors wrap ErrMissingKey or ErrConfig when retrying cannot help.
func (s *Service) Import(ctx context.Context, runID, provider, day string) (ImportResult, error) {
	res := ImportResult{Provider: provider}
	d, err := ParseDay(day)
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	fail := func(err error) (ImportResult, error) {
		msg := err.Error()
		if uerr := s.update(ctx, runID, provider, func(r *models.ReconciliationRun, p *models.ProviderReconciliation) {
			p.Status, p.Error = "failed", msg
			r.Status, r.Error = models.ReconcileFailed, msg
		}); uerr != nil {
			s.log().Warn("reconciliation: recording an import failure", "provider", provider, "err", uerr)
		}
		s.log().Warn("reconciliation import failed", "provider", provider, "day", day, "err", msg)
		return res, err
	}
	pc, ok := s.Config.Providers[provider]
	if !ok {
		return fail(fmt.Errorf("costs.reconciliation.providers.%s is not configured: %w", provider, ErrConfig))
	}
	if err := s.keyProblem(provider); err != nil {
		return fail(err)
	}
	hc := s.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	// The key is read here, at call time, and lives only in this call.
	imp, err := newImporter(provider, pc.Type, pc.BaseURL, pc.Organization, s.getenv(pc.APIKeyEnv), hc)
	if err != nil {
		return fail(fmt.Errorf("costs.reconciliation.providers.%s.type: %v: %w", provider, err, ErrConfig))
	}
	if err := s.update(ctx, runID, provider, func(r *models.ReconciliationRun, p *models.ProviderReconciliation) {
		p.Status, p.Error = "importing", ""
	}); err != nil {
		return res, err
	}
	lines, pages, err := imp.importDay(ctx, d, "")
	res.Pages = pages
	if err != nil {
		return fail(err)
	}
	if err := s.Store.ReplaceProviderUsage(ctx, provider, day, runID, lines); err != nil {
		return fail(err)
	}
	res.Rows = len(lines)
	err = s.update(ctx, runID, provider, func(r *models.ReconciliationRun, p *models.ProviderReconciliation) {
		p.Status, p.Error, p.Rows, p.Pages = "imported", "", res.Rows, pages
		if r.Status == models.ReconcileFailed {
			// An earlier attempt failed; this one got through.
			r.Status, r.Error = models.ReconcileRunning, ""
		}
	})
	return res, err
}

// Fail ends a run as failed with msg.
func (s *Service) Fail(ctx context.Context, runID, msg string) error {
	run, err := s.Store.GetReconciliationRun(ctx, runID)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	run.Status, run.Error, run.FinishedAt = models.ReconcileFailed, msg, &now
	return s.Store.SaveReconciliationRun(ctx, run)
}

// CompareResult summarises a finished run.
type CompareResult struct {
	Alerts []string `json:"alerts,omitempty"`
}

// Compare computes the variance of every imported provider against the
// ledger for the run's day, stores it with the run, ends the run as
// succeeded and publishes a costs.variance event per provider above the
// threshold.
func (s *Service) Compare(ctx context.Context, runID string) (CompareResult, error) {
	var out CompareResult
	run, err := s.Store.GetReconciliationRun(ctx, runID)
	if err != nil {
		return out, err
	}
	from, err := ParseDay(run.Day)
	if err != nil {
		return out, err
	}
	to := from.AddDate(0, 0, 1)
	var alerts []models.ProviderReconciliation
	for i := range run.Providers {
		p := &run.Providers[i]
		lines, err := s.Store.ProviderUsage(ctx, p.Provider, run.Day)
		if err != nil {
			return out, err
		}
		ledger, err := s.Store.LedgerCostByModel(ctx, p.Provider, from, to)
		if err != nil {
			return out, err
		}
		billed := map[string]int64{}
		for _, l := range lines {
			billed[l.Model] += l.CostMicros
		}
		p.Models = compareModels(billed, ledger)
		var pt, lt int64
		for _, m := range p.Models {
			pt += m.ProviderMicros
			lt += m.LedgerMicros
		}
		p.Variance = models.NewVariance(pt, lt)
		p.Alert = p.VarianceMicros != 0 && math.Abs(p.Fraction) > s.Config.VarianceAlertThreshold
		if p.Alert {
			alerts = append(alerts, *p)
		}
	}
	now := time.Now().UTC()
	run.Status, run.Error, run.FinishedAt = models.ReconcileSucceeded, "", &now
	if err := s.Store.SaveReconciliationRun(ctx, run); err != nil {
		return out, err
	}
	for _, p := range alerts {
		msg := VarianceProblem(run.Day, p, s.Config.VarianceAlertThreshold)
		out.Alerts = append(out.Alerts, msg)
		s.log().Warn("reconciliation variance above threshold", "provider", p.Provider, "day", run.Day,
			"provider_cost_usd", p.ProviderUSD, "ledger_cost_usd", p.LedgerUSD, "variance_usd", p.VarianceUSD, "fraction", p.Fraction)
		if s.Events != nil {
			payload, _ := json.Marshal(map[string]any{"provider": p.Provider, "day": run.Day, "run_id": run.ID,
				"provider_cost_micros": p.ProviderMicros, "ledger_cost_micros": p.LedgerMicros, "variance_micros": p.VarianceMicros,
				"provider_cost_usd": p.ProviderUSD, "ledger_cost_usd": p.LedgerUSD, "variance_usd": p.VarianceUSD,
				"variance_fraction": p.Fraction, "threshold": s.Config.VarianceAlertThreshold, "message": msg})
			// One event per provider, day and run: a retried activity does not repeat it.
			ev := &models.Event{Type: VarianceEventType, Payload: string(payload), DedupeKey: VarianceEventType + ":" + run.ID + ":" + p.Provider}
			if _, err := s.Events.Publish(ctx, ev); err != nil {
				return out, fmt.Errorf("publish %s: %w", VarianceEventType, err)
			}
		}
	}
	return out, nil
}

// VarianceProblem describes an alert for people.
func VarianceProblem(day string, p models.ProviderReconciliation, threshold float64) string {
	return fmt.Sprintf("reconciliation: %s billed $%.6f for %s but the ledger records $%.6f (variance $%.6f, %.1f%%, above the %.1f%% threshold)",
		p.Provider, p.ProviderUSD, day, p.LedgerUSD, p.VarianceUSD, 100*p.Fraction, 100*threshold)
}

// compareModels pairs the provider's models with the ledger's. A ledger
// model without an exact match is paired with the provider's dated variant
// of it ("gpt-4o-mini" with "gpt-4o-mini-2024-07-18"): providers bill the
// snapshot a request was served by.
func compareModels(billed, ledger map[string]int64) []models.ModelVariance {
	type pair struct{ p, l int64 }
	pairs := map[string]*pair{}
	get := func(m string) *pair {
		if pairs[m] == nil {
			pairs[m] = &pair{}
		}
		return pairs[m]
	}
	names := make([]string, 0, len(billed))
	for m, v := range billed {
		get(m).p += v
		names = append(names, m)
	}
	slices.Sort(names)
	for m, v := range ledger {
		key := m
		if _, ok := billed[m]; !ok {
			for _, b := range names {
				if strings.HasPrefix(b, m+"-") {
					key = b
					break
				}
			}
		}
		get(key).l += v
	}
	out := make([]models.ModelVariance, 0, len(pairs))
	for m, p := range pairs {
		out = append(out, models.ModelVariance{Model: m, Variance: models.NewVariance(p.p, p.l)})
	}
	slices.SortFunc(out, func(a, b models.ModelVariance) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// Report fills the reconciliation part of GET /costs/status from the last
// run and returns the problems that degrade cost readiness: a missing admin
// key variable, a failed run, a variance above the threshold.
func (s *Service) Report(ctx context.Context, st *costs.ReconciliationStatus) ([]string, error) {
	var problems []string
	if missing := s.MissingKeys(); len(missing) > 0 && (s.Config.Enabled || len(s.Config.Providers) > 0) {
		st.MissingKeys = missing
		st.Status = "misconfigured"
		for _, m := range missing {
			problems = append(problems, "reconciliation: "+strings.TrimSuffix(m, ": "+ErrMissingKey.Error())+"; no export request is sent")
		}
	}
	run, err := s.Store.LatestReconciliationRun(ctx)
	if errors.Is(err, models.ErrNotFound) {
		return problems, nil
	}
	if err != nil {
		return nil, err
	}
	st.LastRun = &costs.ReconciliationRunRef{ID: run.ID, WorkflowID: run.WorkflowID, Trigger: run.Trigger, Status: run.Status,
		StartedAt: run.StartedAt, FinishedAt: run.FinishedAt}
	st.Day, st.Error = run.Day, run.Error
	if st.Status != "misconfigured" {
		st.Status = run.Status
	}
	var worst *float64
	for _, p := range run.Providers {
		st.Providers = append(st.Providers, costs.ReconciliationProviderStatus{Provider: p.Provider, Status: p.Status, Error: p.Error,
			ProviderCostMicros: p.ProviderMicros, LedgerCostMicros: p.LedgerMicros, VarianceMicros: p.VarianceMicros,
			ProviderCostUSD: p.ProviderUSD, LedgerCostUSD: p.LedgerUSD, VarianceUSD: p.VarianceUSD, VarianceFraction: p.Fraction, Alert: p.Alert})
		if run.Status == models.ReconcileSucceeded && (worst == nil || math.Abs(p.Fraction) > math.Abs(*worst)) {
			f := p.Fraction
			worst = &f
		}
		if run.Status == models.ReconcileSucceeded && p.Alert {
			problems = append(problems, VarianceProblem(run.Day, p, s.Config.VarianceAlertThreshold))
		}
	}
	st.Variance = worst
	if run.Status == models.ReconcileFailed {
		problems = append(problems, fmt.Sprintf("reconciliation of %s failed: %s", run.Day, run.Error))
	}
	return problems, nil
}
