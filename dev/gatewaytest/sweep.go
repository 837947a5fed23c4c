package gatewaytest

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Tests of one binary share a Temporal server and run one after another, and
// a fresh test database numbers tasks from 1 again: a run a test leaves
// open (a failure before its own cleanup, a crashed gateway process) keeps
// workflow id task-1 busy and later tests get 409 run_active. So when a test
// first touches the shared server, the open workflows of earlier tests are
// terminated, and again when the test ends.
var (
	sweepMu       sync.Mutex
	sweptForTest  = map[string]bool{}
	sweepClient   client.Client
	sweepClientMu sync.Mutex
)

// sweepAround terminates leftovers before t's first use of the shared server
// and registers the same sweep for when t ends.
func sweepAround(t testing.TB, addr string) {
	sweepMu.Lock()
	first := !sweptForTest[t.Name()]
	sweptForTest[t.Name()] = true
	sweepMu.Unlock()
	if !first {
		// A second gateway in the same test (a restart) must find the
		// first one's runs still open.
		return
	}
	terminateOpenWorkflows(t, addr, "left over by an earlier test")
	t.Cleanup(func() { terminateOpenWorkflows(t, addr, "test ended") })
}

func terminateOpenWorkflows(t testing.TB, addr, reason string) {
	c, err := sweepDial(addr)
	if err != nil {
		t.Logf("sweep open workflows: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var token []byte
	for {
		page, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: `ExecutionStatus = "Running"`, NextPageToken: token,
		})
		if err != nil {
			t.Logf("sweep open workflows: %v", err)
			return
		}
		for _, e := range page.Executions {
			// Already-ended runs answer NotFound; nothing to do then.
			if c.TerminateWorkflow(ctx, e.Execution.WorkflowId, e.Execution.RunId, reason) == nil {
				t.Logf("terminated open workflow %s (%s)", e.Execution.WorkflowId, reason)
			}
		}
		if token = page.NextPageToken; len(token) == 0 {
			return
		}
	}
}

func sweepDial(addr string) (client.Client, error) {
	sweepClientMu.Lock()
	defer sweepClientMu.Unlock()
	if sweepClient != nil {
		return sweepClient, nil
	}
	c, err := client.Dial(client.Options{HostPort: addr, Logger: nopLogger{}})
	if err != nil {
		return nil, err
	}
	sweepClient = c
	return c, nil
}

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
