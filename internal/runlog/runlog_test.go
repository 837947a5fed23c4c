package runlog

import (
	"context"
	"errors"
	"testing"
)

// A run requested before the run log existed names no snapshot; it must get
// the error that tells the operator to start it again, not a lookup of "".
func TestRunWithoutSnapshotSaysItWasStartedByAnOlderGateway(t *testing.T) {
	var v map[string]any
	if err := (&Log{}).Snapshot(context.Background(), "", &v); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("got %v, want ErrNoSnapshot", err)
	}
}
