package agentdef

import (
	"strings"
	"testing"
	"time"
)

func TestApprovalsBlock(t *testing.T) {
	d, err := Parse([]byte("id: a\napprovals: {tools: [write_file, mcp__github__*], timeout: 30m}\n"), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]bool{"write_file": true, "read_file": false, "mcp__github__create_pr": true, "mcp__gitlab__x": false} {
		if got := d.Approvals.Needs(tool); got != want {
			t.Errorf("Needs(%s) = %v", tool, got)
		}
	}
	if d.Approvals.Wait() != 30*time.Minute || (&Approvals{Tools: []string{"x"}}).Wait() != DefaultApprovalTimeout {
		t.Fatal("timeouts")
	}
	var none *Approvals
	if none.Needs("write_file") {
		t.Fatal("no block needs nothing")
	}
	for _, bad := range []string{"approvals: {tools: []}", "approvals: {tools: [a*b]}", "approvals: {tools: [x], timeout: soon}"} {
		if _, err := Parse([]byte("id: a\n"+bad+"\n"), "a.yaml"); err == nil || !strings.Contains(err.Error(), "approvals.") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
