package replay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The versioning policy (docs/decisions.md) in one example: a workflow
// changes the commands it issues - v2 adds a step before the greeting -
// while runs of v1 are in flight. Guarded by workflow.GetVersion, a
// history recorded from v1 (testdata/versioning/VersionDemo-v1.json, a
// real run on the embedded server) still replays; the same change
// without the guard does not.

const versionDemoName = "VersionDemo"

func demoOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
}

// versionDemoV1 greets.
func versionDemoV1(ctx workflow.Context, name string) (string, error) {
	var out string
	err := workflow.ExecuteActivity(demoOptions(ctx), "Greet", name).Get(ctx, &out)
	return out, err
}

// versionDemoV2 normalises the name first - for runs started after the
// change only.
func versionDemoV2(ctx workflow.Context, name string) (string, error) {
	ctx = demoOptions(ctx)
	if v := workflow.GetVersion(ctx, "normalise-name", workflow.DefaultVersion, 1); v == 1 {
		if err := workflow.ExecuteActivity(ctx, "Normalise", name).Get(ctx, &name); err != nil {
			return "", err
		}
	}
	var out string
	err := workflow.ExecuteActivity(ctx, "Greet", name).Get(ctx, &out)
	return out, err
}

// versionDemoV2Unguarded is the same change without GetVersion.
func versionDemoV2Unguarded(ctx workflow.Context, name string) (string, error) {
	ctx = demoOptions(ctx)
	if err := workflow.ExecuteActivity(ctx, "Normalise", name).Get(ctx, &name); err != nil {
		return "", err
	}
	var out string
	err := workflow.ExecuteActivity(ctx, "Greet", name).Get(ctx, &out)
	return out, err
}

func registerDemoActivities(r sdkworker.ActivityRegistry) {
	r.RegisterActivityWithOptions(func(_ context.Context, name string) (string, error) { return "hello " + name, nil },
		activity.RegisterOptions{Name: "Greet"})
	r.RegisterActivityWithOptions(func(_ context.Context, name string) (string, error) { return strings.TrimSpace(name), nil },
		activity.RegisterOptions{Name: "Normalise"})
}

func replayDemo(fn any) error {
	r := sdkworker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: versionDemoName})
	return r.ReplayWorkflowHistoryFromJSONFile(quiet(), "testdata/versioning/VersionDemo-v1.json")
}

func TestHistoryBeforeAPatchedChangeReplaysAfterIt(t *testing.T) {
	if err := replayDemo(versionDemoV1); err != nil {
		t.Fatalf("v1 history does not replay on v1: %v", err)
	}
	if err := replayDemo(versionDemoV2); err != nil {
		t.Fatalf("v1 history does not replay after the GetVersion-guarded change: %v", err)
	}
	if err := replayDemo(versionDemoV2Unguarded); err == nil {
		t.Fatal("the unguarded change replayed a v1 history; the replayer no longer detects non-determinism")
	}
}
