package agentdef

import (
	"strings"
	"testing"
)

// max_cost_usd (issue 47): a number of dollars from 0; a negative, NaN or
// non-numeric value is refused at load naming the field and the file.
func TestMaxCostUSDCheckedAtLoad(t *testing.T) {
	for _, v := range []string{"-1", ".nan", "lots", "[1]"} {
		_, err := Parse([]byte("id: capped\nmax_cost_usd: "+v+"\n"), "capped.yaml")
		if err == nil || !strings.Contains(err.Error(), "max_cost_usd") || !strings.Contains(err.Error(), "capped.yaml") {
			t.Errorf("max_cost_usd %s: %v", v, err)
		}
	}
	d, err := Parse([]byte("id: capped\nmax_cost_usd: 0.05\n"), "capped.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.MaxCostMicros(); got != 50_000 {
		t.Fatalf("MaxCostMicros = %d", got)
	}
	if d, err := Parse([]byte("id: free\n"), "free.yaml"); err != nil || d.MaxCostMicros() != 0 {
		t.Fatalf("no cap: %v %v", d, err)
	}
}
