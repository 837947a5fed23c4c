package config

import (
	"strings"
	"testing"
)

// storage.sqlite.durability defaults to power when hard budgets rely on the
// ledger, to process otherwise; an explicit value wins; a wrong one is
// refused naming the key (issue 43).
func TestDurabilityDefaultFollowsEnforcement(t *testing.T) {
	for _, tc := range []struct{ mode, set, want string }{
		{"soft", "", DurabilityProcess}, {"off", "", DurabilityProcess}, {"hard", "", DurabilityPower},
		{"hard", "process", DurabilityProcess}, {"soft", "power", DurabilityPower},
	} {
		c := Defaults()
		c.Costs.EnforcementMode, c.Storage.SQLite.Durability = tc.mode, tc.set
		if got := c.Durability(); got != tc.want {
			t.Errorf("mode %s, set %q: durability %s, want %s", tc.mode, tc.set, got, tc.want)
		}
	}
	c := Defaults()
	if err := Parse([]byte("storage: {sqlite: {durability: disk}}\n"), "t.yaml", &c); err != nil {
		t.Fatal(err)
	}
	if err := Validate(&c); err == nil || !strings.Contains(err.Error(), "storage.sqlite.durability") {
		t.Fatalf("validate = %v", err)
	}
}
