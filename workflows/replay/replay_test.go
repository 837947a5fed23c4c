package replay_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/worker"
)

func TestMain(m *testing.M) { gatewaytest.Main(m) }

func quiet() log.Logger { return log.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

func histories(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories in testdata (%v); record them: go test ./workflows/replay -run TestRecord -update", err)
	}
	return files
}

// Every recorded history replays against the current workflow code, with
// the workflows registered exactly as the worker registers them.
func TestReplayRecordedHistories(t *testing.T) {
	for _, f := range histories(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(quiet(), f); err != nil {
				t.Fatalf("%s no longer replays: %v\nIf the change is intended, guard it with workflow.GetVersion (docs/decisions.md, versioning policy); re-record only for a change that cannot affect runs in flight.", f, err)
			}
		})
	}
}

// Each workflow the worker registers has at least one recorded history.
func TestEveryWorkflowHasAHistory(t *testing.T) {
	have := map[string]bool{}
	for _, f := range histories(t) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(fh, client.HistoryJSONOptions{})
		fh.Close()
		if err != nil || len(h.GetEvents()) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		typ := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		if !strings.HasPrefix(filepath.Base(f), typ+"-") {
			t.Errorf("%s holds a %s history; name it %s-<what>.json", f, typ, typ)
		}
		have[typ] = true
	}
	for _, wf := range worker.Workflows {
		if !have[wf.Name] {
			t.Errorf("no recorded history of %s in testdata: record one (see workflows/replay/doc.go)", wf.Name)
		}
	}
}
