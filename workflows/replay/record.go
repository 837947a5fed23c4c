package replay

import (
	"context"
	"fmt"
	"os"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// HistoryFile writes the full history of a closed workflow execution to
// path as JSON (the format replayers and the Temporal CLI read).
func HistoryFile(ctx context.Context, c client.Client, workflowID, runID, path string) error {
	iter := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return fmt.Errorf("history of %s: %w", workflowID, err)
		}
		h.Events = append(h.Events, ev)
	}
	data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
