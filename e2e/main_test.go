// Package e2e holds end-to-end tests: a whole gateway in-process (real
// HTTP on loopback, embedded Temporal, SQLite or PostgreSQL, the scripted
// fake provider). They share one test binary, so the large embedded
// Temporal server is linked and started once per run.
package e2e

import (
	"testing"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the stdio MCP server (see mcp_test.go).
	runMCPServerIfAsked()
	gatewaytest.Main(m)
}
