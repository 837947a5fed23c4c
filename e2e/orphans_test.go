package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/taskruns"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Issue 18 item 5, task runs (check only: internal/taskruns is being
// rewritten): a run recorded by a process that died before starting its
// workflow stays queued, and the next run request for its task repairs it
// (failed, with the reason) and starts a new run. Nothing sweeps such runs
// on its own; this pins down the recovery that exists.
func TestTaskRunQueuedWithoutWorkflowIsRepairedByTheNextRun(t *testing.T) {
	g := wbStart(t, "")
	id := wbCreateTask(t, g, map[string]any{"title": "orphaned run", "agent_id": "writer"})
	orphan, err := g.Store.CreateRun(t.Context(), models.NewRun{TaskID: id, AgentID: "writer", Trigger: "api", WorkflowID: workflows.TaskRunWorkflowID(id)})
	if err != nil {
		t.Fatal(err)
	}
	// As old as a start that never came (the repair leaves young ones alone).
	if err := g.Store.DB.Model(&models.TaskRun{}).Where("id = ?", orphan.ID).Update("created_at", time.Now().Add(-10*time.Minute)).Error; err != nil {
		t.Fatal(err)
	}
	r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, r, 202, "a run after the orphan")
	if wbID(t, r) == orphan.ID {
		t.Fatal("the orphan was reused")
	}
	old, err := g.Store.RunByID(t.Context(), orphan.ID)
	if err != nil || old.Status != models.RunFailed || old.Error == "" {
		t.Fatalf("the orphaned run after repair: %+v %v", old, err)
	}
	wbWaitRun(t, g, id, wbID(t, r), 60*time.Second, "finished", "failed")
}

// Issue 18 item 5, found again by the probe (dev/probe): a run queued by a
// process killed before it started the run's workflow stayed queued until
// its task's next run request. The sweep every gateway runs at start (and
// every minute for runs older than the start grace) fails it.
func TestTaskRunQueuedWithoutWorkflowIsFailedBySweep(t *testing.T) {
	g := wbStart(t, "")
	id := wbCreateTask(t, g, map[string]any{"title": "orphaned run", "agent_id": "writer"})
	orphan, err := g.Store.CreateRun(t.Context(), models.NewRun{TaskID: id, AgentID: "writer", Trigger: "api", WorkflowID: workflows.TaskRunWorkflowID(id)})
	if err != nil {
		t.Fatal(err)
	}
	runs := &taskruns.Service{Client: g.Temporal, Store: g.Store}
	// A run younger than `before` is left to the request starting it.
	if n, err := runs.Sweep(t.Context(), orphan.CreatedAt.Add(-time.Second)); err != nil || n != 0 {
		t.Fatalf("sweep before the run: %d %v", n, err)
	}
	if n, err := runs.Sweep(t.Context(), time.Now().Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	old, err := g.Store.RunByID(t.Context(), orphan.ID)
	if err != nil || old.Status != models.RunFailed || !strings.Contains(old.Error, "before the run's workflow started") {
		t.Fatalf("the orphaned run after the sweep: %+v %v", old, err)
	}
	// The task takes a new run at once.
	r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, r, 202, "a run after the sweep")
	wbWaitRun(t, g, id, wbID(t, r), 60*time.Second, "finished", "failed")
}
