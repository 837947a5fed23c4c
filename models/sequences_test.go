package models

import (
	"context"
	"testing"
)

// The scenario at the store: delete the newest task, restart
// (reopen: migrations run again), create a task - it gets a new id, and
// its run's events are not swallowed by the old run's dedupe keys.
func TestIDsAreNotReusedAcrossRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		s := mustOpen(t, opts)
		if _, err := s.CreateTask(ctx, TaskFields{Title: ptr("older")}); err != nil {
			t.Fatal(err)
		}
		newest, oldRun := taskWithFinishedRun(t, s, "newest")
		if _, err := s.DeleteTask(ctx, newest.ID); err != nil {
			t.Fatal(err)
		}
		s.Close()

		s = mustOpen(t, opts)
		task, run := taskWithFinishedRun(t, s, "after restart")
		if task.ID <= newest.ID || run.ID <= oldRun.ID {
			t.Fatalf("ids reused: task %d after deleted %d, run %d after %d", task.ID, newest.ID, run.ID, oldRun.ID)
		}
		for _, typ := range []string{EventRunStarted, EventRunFinished} {
			n := 0
			for _, ev := range eventsOfType(t, s, typ) {
				if ev.RunID == run.ID {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d %s events of the new run %d", n, typ, run.ID)
			}
		}
	})
}

// A SQLite database whose sequence was already reset (by an earlier
// version) is repaired by data migration 2 from the ids in events.
func TestMigrationRepairsResetSequences(t *testing.T) {
	ctx := context.Background()
	opts := backends[0].opts(t)
	s := mustOpen(t, opts)
	newest, oldRun := taskWithFinishedRun(t, s, "newest")
	if _, err := s.DeleteTask(ctx, newest.ID); err != nil {
		t.Fatal(err)
	}
	// What the old migrator left: marks at the largest remaining id and
	// the repair not yet applied.
	for _, q := range []string{"UPDATE sqlite_sequence SET seq = 0 WHERE name IN ('tasks', 'task_runs')", "DELETE FROM schema_migrations WHERE version >= 2"} {
		if err := s.DB.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s = mustOpen(t, opts)
	task, run := taskWithFinishedRun(t, s, "after repair")
	if task.ID <= newest.ID || run.ID <= oldRun.ID {
		t.Fatalf("ids reused: task %d after deleted %d, run %d after %d", task.ID, newest.ID, run.ID, oldRun.ID)
	}
}

func taskWithFinishedRun(t *testing.T, s *Store, title string) (*Task, *TaskRun) {
	t.Helper()
	ctx := context.Background()
	task, err := s.CreateTask(ctx, TaskFields{Title: ptr(title), AgentID: ptr("writer")})
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.CreateRun(ctx, NewRun{TaskID: task.ID, AgentID: "writer", Trigger: "api", WorkflowID: "task-x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkRunStarted(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.FinishRun(ctx, RunOutcome{RunID: run.ID, Status: RunFinished}); err != nil {
		t.Fatal(err)
	}
	return task, run
}
