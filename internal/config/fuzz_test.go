package config

import (
	"reflect"
	"testing"
)

// FuzzParse: any config file parses (and then validates) or is an error
// naming the file; never a panic, and what validates holds no NaN or
// infinite number.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"server: {port: 8080}\n", "server: {port: 1.5}\n", "llm:\n  providers:\n    p: {type: openai, max_retries: 2}\n",
		"a: &x {b: *x}\n", "server:\n  port: many\n", "costs:\n  pricing:\n    a/b: {input_per_mtok: -2}\n", "{", "- 1\n- 2\n", "",
		// Regression seeds: NaN and infinity parse but were accepted as budgets and prices.
		"costs: {daily_budget_usd: .nan}\n", "costs:\n  pricing:\n    a/b: {input_per_mtok: .inf}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c := Defaults()
		if err := Parse(doc, "fuzz.yaml", &c); err != nil {
			return
		}
		if Validate(&c) == nil {
			if bad := nonFinite(reflect.ValueOf(c), ""); len(bad) > 0 {
				t.Fatalf("accepted a number that is not finite: %v", bad)
			}
		}
	})
}
