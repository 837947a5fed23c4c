package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/gateway"
	"github.com/agentryhq/agentry/internal/config"
)

func TestMain(m *testing.M) { gatewaytest.Main(m) }

// StartWorker (`agentryd worker`) builds the services from the
// configuration and polls the task queue for workflow and activity tasks.
func TestStartWorkerPollsTheTaskQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the embedded Temporal server")
	}
	ctx := context.Background()
	queue := fmt.Sprintf("worker-test-%d", time.Now().UnixNano())
	cfg, err := config.Load(ctx, config.MapEnv(map[string]string{config.EnvWorkspace: t.TempDir(),
		"AGENTRY_TEMPORAL_ADDRESS": gatewaytest.SharedTemporal(t), "AGENTRY_TEMPORAL_TASK_QUEUE": queue}))
	if err != nil {
		t.Fatal(err)
	}
	w, err := gateway.StartWorker(ctx, gateway.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Shutdown(ctx)
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			desc, err := w.Temporal.DescribeTaskQueue(ctx, queue, kind)
			if err == nil && len(desc.GetPollers()) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s poller on task queue %s: %v", kind, queue, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
