package chat

import (
	"regexp"
	"testing"
)

// Run and response ids are a prefix and a version 7 UUID's 32 lowercase
// hex digits, growing with time (they are appended to the action log's
// and the ledger's indexes).
func TestNewRunIDs(t *testing.T) {
	run := regexp.MustCompile(`^run_[0-9a-f]{12}7[0-9a-f]{19}$`)
	resp := regexp.MustCompile(`^resp_[0-9a-f]{12}7[0-9a-f]{19}$`)
	var last string
	for range 1000 {
		r, p := NewRunIDs()
		if !run.MatchString(r) || !resp.MatchString(p) {
			t.Fatalf("ids %q %q", r, p)
		}
		if r <= last {
			t.Fatalf("run id %q after %q", r, last)
		}
		last = r
	}
}
