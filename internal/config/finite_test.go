package config

import (
	"context"
	"strings"
	"testing"
)

// NaN and infinity parse as numbers (Go's ParseFloat for environment
// overrides, YAML's .nan and .inf) but mean nothing as a budget, price or
// ratio: a NaN daily budget compares false with every spend and would never
// stop one. Both ways in are refused, naming the key.
func TestNonFiniteNumbersAreRefused(t *testing.T) {
	for _, env := range []map[string]string{
		{"AGENTRY_COSTS_DAILY_BUDGET_USD": "NaN"},
		{"AGENTRY_COSTS_DAILY_BUDGET_USD": "Inf"},
		{"AGENTRY_COSTS_MONTHLY_BUDGET_USD": "+infinity"},
		{"AGENTRY_TELEMETRY_SAMPLE_RATIO": "nan"},
	} {
		cfg := Defaults()
		if err := ApplyEnv(context.Background(), &cfg, MapEnv(env)); err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		normalize(&cfg)
		if err := Validate(&cfg); err == nil || !strings.Contains(err.Error(), "must be a finite number") {
			t.Errorf("%v accepted: %v", env, err)
		}
	}
	for doc, key := range map[string]string{
		"costs: {per_user_daily_budget_usd: .nan}\n":                                         "costs.per_user_daily_budget_usd",
		"costs:\n  pricing:\n    openai/gpt-x: {input_per_mtok: .inf, output_per_mtok: 1}\n": "costs.pricing.openai/gpt-x.input_per_mtok",
		"costs: {alert_threshold: -.inf}\n":                                                  "costs.alert_threshold",
	} {
		cfg := Defaults()
		if err := Parse([]byte(doc), "c.yaml", &cfg); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if err := Validate(&cfg); err == nil || !strings.Contains(err.Error(), key+": must be a finite number") {
			t.Errorf("%q accepted or not named: %v", doc, err)
		}
	}
}
