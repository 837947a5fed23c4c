package agentdef

import (
	"strings"
	"time"
)

// DefaultApprovalTimeout is how long a durable run waits for a person's
// decision on a tool call when the agent's approvals.timeout is not set;
// an approval left undecided that long counts as rejected.
const DefaultApprovalTimeout = 24 * time.Hour

// Approvals is an agent's approvals block: the tools a person must approve
// before a durable run executes them.
//
//	approvals: {tools: [write_file, mcp__github__*], timeout: 24h}
type Approvals struct {
	// Tools are tool names; a name ending in * matches every tool that
	// starts with the rest (mcp__github__*).
	Tools []string `yaml:"tools" json:"tools"`
	// Timeout is how long a run waits for a decision (a Go duration;
	// default DefaultApprovalTimeout).
	Timeout string `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// Needs reports whether calling tool needs a person's approval (false on a
// nil block).
func (a *Approvals) Needs(tool string) bool {
	if a == nil {
		return false
	}
	return ApprovalNeeded(a.Tools, tool)
}

// Wait is the approval timeout (DefaultApprovalTimeout when unset or
// invalid; validation refuses invalid ones).
func (a *Approvals) Wait() time.Duration {
	if a != nil && a.Timeout != "" {
		if d, err := time.ParseDuration(a.Timeout); err == nil && d > 0 {
			return d
		}
	}
	return DefaultApprovalTimeout
}

// ApprovalNeeded reports whether tool matches one of patterns (exact
// names, or prefixes ending in *). It is pure, so workflow code uses it.
func ApprovalNeeded(patterns []string, tool string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(tool, prefix) {
				return true
			}
		} else if p == tool {
			return true
		}
	}
	return false
}
