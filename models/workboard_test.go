package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func eventsOfType(t *testing.T, s *Store, typ string) []Event {
	t.Helper()
	evs, err := s.EventsAfter(context.Background(), 0, EventFilter{TypePrefixes: []string{typ}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func TestTaskCRUD(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()

		task, err := s.CreateTask(ctx, TaskFields{Title: ptr("  Write the report  "), Tags: ptr([]string{"a", " b", "a"}),
			DueAt: ptr("2026-03-01T10:00:00+01:00"), Priority: ptr("HIGH")})
		if err != nil {
			t.Fatal(err)
		}
		if task.ID == 0 || task.Title != "Write the report" || task.Status != TaskTodo || task.Priority != PriorityHigh {
			t.Fatalf("created %+v", task)
		}
		if got := task.TagList(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
			t.Fatalf("tags %v", got)
		}
		if task.DueAt == nil || !task.DueAt.Equal(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)) {
			t.Fatalf("due_at %v", task.DueAt)
		}
		if evs := eventsOfType(t, s, EventTaskCreated); len(evs) != 1 || evs[0].TaskID != task.ID {
			t.Fatalf("task.created events %+v", evs)
		}

		// A patch changes only what it names; "" clears due_at.
		up, err := s.UpdateTask(ctx, task.ID, TaskFields{Owner: ptr("ana"), DueAt: ptr("")})
		if err != nil {
			t.Fatal(err)
		}
		if up.Owner != "ana" || up.DueAt != nil || up.Title != "Write the report" || up.Priority != PriorityHigh || len(up.TagList()) != 2 {
			t.Fatalf("updated %+v", up)
		}
		got, err := s.GetTask(ctx, task.ID)
		if err != nil || got.Owner != "ana" || got.DueAt != nil {
			t.Fatalf("reread %+v %v", got, err)
		}
		evs := eventsOfType(t, s, EventTaskUpdated)
		if len(evs) != 1 {
			t.Fatalf("task.updated events %d", len(evs))
		}
		if ch, _ := evs[0].PayloadMap()["changed"].([]any); len(ch) != 2 || ch[0] != "owner" || ch[1] != "due_at" {
			t.Fatalf("changed %v", evs[0].PayloadMap()["changed"])
		}
		// A patch that changes nothing writes no event.
		if _, err := s.UpdateTask(ctx, task.ID, TaskFields{Owner: ptr("ana")}); err != nil {
			t.Fatal(err)
		}
		if n := len(eventsOfType(t, s, EventTaskUpdated)); n != 1 {
			t.Fatalf("no-op patch wrote an event (%d)", n)
		}

		if _, err := s.GetTask(ctx, 999); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing task: %v", err)
		}
		if _, err := s.DeleteTask(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetTask(ctx, task.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted task: %v", err)
		}
		// Ids are never reused (SQLite AUTOINCREMENT, PostgreSQL sequences):
		// workflow ids and artifact folders are built from them.
		next, err := s.CreateTask(ctx, TaskFields{Title: ptr("next")})
		if err != nil {
			t.Fatal(err)
		}
		if next.ID <= task.ID {
			t.Fatalf("id %d reused after deleting %d", next.ID, task.ID)
		}
	})
}

func TestTaskValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		task, err := s.CreateTask(ctx, TaskFields{Title: ptr("ok")})
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name  string
			f     TaskFields
			field string
		}{
			{"no title", TaskFields{}, "title"},
			{"blank title", TaskFields{Title: ptr(strings.Repeat(" \t\n", 3500))}, "title"},
			{"long title", TaskFields{Title: ptr(strings.Repeat("x", MaxTitleRunes+1))}, "title"},
			{"bad status", TaskFields{Title: ptr("t"), Status: ptr("doing")}, "status"},
			{"bad priority", TaskFields{Title: ptr("t"), Priority: ptr("p1")}, "priority"},
			{"empty tag", TaskFields{Title: ptr("t"), Tags: ptr([]string{"a", " "})}, "tags"},
			{"bad due", TaskFields{Title: ptr("t"), DueAt: ptr("tomorrow")}, "due_at"},
		}
		for _, c := range cases {
			_, err := s.CreateTask(ctx, c.f)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Errorf("create %s: got %v, want a validation error on %s", c.name, err, c.field)
			}
			if c.name == "no title" {
				continue
			}
			_, err = s.UpdateTask(ctx, task.ID, c.f)
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Errorf("update %s: got %v, want a validation error on %s", c.name, err, c.field)
			}
		}
		// Nothing was changed by the refused requests.
		got, _ := s.GetTask(ctx, task.ID)
		if got.Title != "ok" || got.Status != TaskTodo || got.Priority != PriorityNormal || got.DueAt != nil || len(got.TagList()) != 0 {
			t.Fatalf("refused updates changed the task: %+v", got)
		}
		tasks, _, _ := s.ListTasks(ctx, TaskFilter{})
		if len(tasks) != 1 {
			t.Fatalf("refused creates inserted tasks: %d", len(tasks))
		}
		if n := len(eventsOfType(t, s, EventTaskUpdated)); n != 0 {
			t.Fatalf("refused updates wrote %d events", n)
		}
	})
}

func TestListTasksFiltersAndPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		for i := range 7 {
			st, agent := TaskTodo, "a"
			if i%2 == 1 {
				st, agent = TaskDone, "b"
			}
			if _, err := s.CreateTask(ctx, TaskFields{Title: ptr("t"), Status: ptr(st), AgentID: ptr(agent)}); err != nil {
				t.Fatal(err)
			}
		}
		var all []Task
		cursor := int64(0)
		for pages := 0; ; pages++ {
			page, next, err := s.ListTasks(ctx, TaskFilter{Page: Page{Limit: 3, Cursor: cursor}})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page...)
			if next == 0 {
				break
			}
			cursor = next
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
		}
		if len(all) != 7 {
			t.Fatalf("pages gave %d tasks", len(all))
		}
		for i := 1; i < len(all); i++ {
			if all[i].ID <= all[i-1].ID {
				t.Fatalf("not in id order: %d after %d", all[i].ID, all[i-1].ID)
			}
		}
		done, _, err := s.ListTasks(ctx, TaskFilter{Status: TaskDone})
		if err != nil || len(done) != 3 {
			t.Fatalf("status filter: %d %v", len(done), err)
		}
		a, _, err := s.ListTasks(ctx, TaskFilter{AgentID: "a", Status: TaskTodo})
		if err != nil || len(a) != 4 {
			t.Fatalf("agent filter: %d %v", len(a), err)
		}
		var ve *ValidationError
		if _, _, err := s.ListTasks(ctx, TaskFilter{Status: "nope"}); !errors.As(err, &ve) {
			t.Fatalf("bad status filter: %v", err)
		}
	})
}

func TestRunLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		noAgent, _ := s.CreateTask(ctx, TaskFields{Title: ptr("no agent")})
		var ve *ValidationError
		if _, err := s.CreateRun(ctx, NewRun{TaskID: noAgent.ID}); !errors.As(err, &ve) || ve.Field != "agent_id" {
			t.Fatalf("run without agent: %v", err)
		}
		task, _ := s.CreateTask(ctx, TaskFields{Title: ptr("t"), AgentID: ptr("writer")})

		// Racing creates: exactly one wins.
		var wg sync.WaitGroup
		results := make([]error, 8)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i] = s.CreateRun(ctx, NewRun{TaskID: task.ID, AgentID: "writer", Trigger: "api", WorkflowID: "task-x"})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range results {
			switch {
			case err == nil:
				won++
			case errors.Is(err, ErrRunActive):
			default:
				t.Fatalf("create run: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d concurrent creates won", won)
		}
		run, err := s.ActiveRun(ctx, task.ID)
		if err != nil || run.Attempt != 1 || run.Status != RunQueued {
			t.Fatalf("active run %+v %v", run, err)
		}
		if _, err := s.DeleteTask(ctx, task.ID); !errors.Is(err, ErrRunActive) {
			t.Fatalf("delete with active run: %v", err)
		}

		// Start twice (a retried activity): one event.
		for range 2 {
			if _, err := s.MarkRunStarted(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(eventsOfType(t, s, EventRunStarted)); n != 1 {
			t.Fatalf("run.started events: %d", n)
		}
		if got, _ := s.GetTask(ctx, task.ID); got.Status != TaskRunning {
			t.Fatalf("task status %s", got.Status)
		}

		a1, fresh, err := s.RecordArtifact(ctx, NewArtifact{RunID: run.ID, Path: "/ws/artifacts/1/1/r.md", Name: "r.md", SizeBytes: 3, Tool: "write_file", DedupeKey: "k1"})
		if err != nil || !fresh {
			t.Fatalf("artifact: %v %v", fresh, err)
		}
		a2, fresh, err := s.RecordArtifact(ctx, NewArtifact{RunID: run.ID, Path: "/ws/artifacts/1/1/r.md", Name: "r.md", SizeBytes: 5, Tool: "write_file", DedupeKey: "k1"})
		if err != nil || fresh || a2.ID != a1.ID || a2.SizeBytes != 5 {
			t.Fatalf("repeated artifact: %+v fresh=%v %v", a2, fresh, err)
		}
		arts, total, _, err := s.ListArtifacts(ctx, task.ID, Page{})
		if err != nil || len(arts) != 1 || total != 1 {
			t.Fatalf("artifacts %d/%d %v", len(arts), total, err)
		}

		// Two settled LLM calls of this run in the ledger, one of another run.
		for i, c := range []struct {
			run   int64
			micro int64
		}{{run.ID, 1000}, {run.ID, 500}, {run.ID + 100, 7}} {
			if err := s.DB.Create(&LedgerEntry{CallID: fmt.Sprintf("call-%d", i), RunID: TaskRunLedgerID(c.run), Source: "task",
				Outcome: OutcomeSucceeded, CostMicros: c.micro}).Error; err != nil {
				t.Fatal(err)
			}
		}
		out := RunOutcome{RunID: run.ID, Status: RunFinished, Reply: "done", Turns: 2, InputTokens: 10, OutputTokens: 4, StopReason: "finished"}
		fin, applied, err := s.FinishRun(ctx, out)
		if err != nil || !applied || fin.Status != RunFinished || fin.FinishedAt == nil {
			t.Fatalf("finish: %+v %v %v", fin, applied, err)
		}
		// The first outcome wins; a late failure changes nothing.
		if _, applied, err := s.FinishRun(ctx, RunOutcome{RunID: run.ID, Status: RunFailed, Error: "late"}); err != nil || applied {
			t.Fatalf("second finish: %v %v", applied, err)
		}
		if n := len(eventsOfType(t, s, EventRunFinished)) + len(eventsOfType(t, s, EventRunFailed)); n != 1 {
			t.Fatalf("terminal events: %d", n)
		}
		if got, _ := s.GetTask(ctx, task.ID); got.Status != TaskNeedsReview {
			t.Fatalf("task status after finish %s", got.Status)
		}
		if _, err := s.MarkRunStarted(ctx, run.ID); !errors.Is(err, ErrRunNotActive) {
			t.Fatalf("start after finish: %v", err)
		}

		// The next run gets attempt 2; history is newest first.
		run2, err := s.CreateRun(ctx, NewRun{TaskID: task.ID, AgentID: "writer"})
		if err != nil || run2.Attempt != 2 {
			t.Fatalf("second run %+v %v", run2, err)
		}
		if _, _, err := s.FinishRun(ctx, RunOutcome{RunID: run2.ID, Status: RunCancelled, Error: "cancelled"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTask(ctx, task.ID); got.Status != TaskTodo {
			t.Fatalf("task status after cancel %s", got.Status)
		}
		runs, total, next, err := s.ListRuns(ctx, task.ID, Page{Limit: 1})
		if err != nil || len(runs) != 1 || runs[0].ID != run2.ID || total != 2 || next != run2.ID {
			t.Fatalf("runs page 1: %v total=%d next=%d %v", runs, total, next, err)
		}
		runs, _, next, err = s.ListRuns(ctx, task.ID, Page{Limit: 1, Cursor: next})
		if err != nil || len(runs) != 1 || runs[0].ID != run.ID || next != 0 || runs[0].CostMicros != 1500 {
			t.Fatalf("runs page 2: %+v next=%d %v", runs, next, err)
		}
		if _, err := s.GetRun(ctx, noAgent.ID, run.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("run of another task: %v", err)
		}

		if _, _, err := s.CreateComment(ctx, task.ID, NewComment{Body: "x"}); err != nil {
			t.Fatal(err)
		}
		// Delete removes comments, runs and artifacts.
		if _, err := s.DeleteTask(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		for _, m := range []any{&TaskRun{}, &Artifact{}, &Comment{}} {
			var n int64
			s.DB.Model(m).Where("task_id = ?", task.ID).Count(&n)
			if n != 0 {
				t.Fatalf("%T rows left: %d", m, n)
			}
		}
		if n := len(eventsOfType(t, s, EventTaskDeleted)); n != 1 {
			t.Fatalf("task.deleted events: %d", n)
		}
	})
}

func TestReviewComments(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		task, _ := s.CreateTask(ctx, TaskFields{Title: ptr("t"), Status: ptr(TaskTodo)})

		var ve *ValidationError
		for _, bad := range []NewComment{
			{Body: "  "},
			{Body: "x", Kind: "shout"},
			{Body: "x", Decision: DecisionAccept},
			{Body: "x", Kind: CommentReview, Decision: "maybe"},
		} {
			if _, _, err := s.CreateComment(ctx, task.ID, bad); !errors.As(err, &ve) {
				t.Errorf("comment %+v: %v", bad, err)
			}
		}
		if _, _, err := s.CreateComment(ctx, task.ID, NewComment{Body: "x", Kind: CommentReview, Decision: DecisionAccept}); !errors.Is(err, ErrNotInReview) {
			t.Fatalf("decision outside review: %v", err)
		}
		if _, _, err := s.CreateComment(ctx, 12345, NewComment{Body: "x"}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("comment on missing task: %v", err)
		}
		_, total, _, _ := s.ListComments(ctx, task.ID, Page{})
		if total != 0 {
			t.Fatalf("refused comments were stored: %d", total)
		}

		s.UpdateTask(ctx, task.ID, TaskFields{Status: ptr(TaskNeedsReview)})
		c, after, err := s.CreateComment(ctx, task.ID, NewComment{Author: "rev", Body: "needs sources", Kind: "Review", Decision: "REJECT"})
		if err != nil || after.Status != TaskTodo || c.Kind != CommentReview || c.Decision != DecisionReject {
			t.Fatalf("reject: %+v %+v %v", c, after, err)
		}
		s.UpdateTask(ctx, task.ID, TaskFields{Status: ptr(TaskNeedsReview)})
		_, after, err = s.CreateComment(ctx, task.ID, NewComment{Body: "good", Kind: CommentReview, Decision: DecisionAccept})
		if err != nil || after.Status != TaskDone {
			t.Fatalf("accept: %+v %v", after, err)
		}
		// A plain review (no decision) is allowed in any status.
		if _, _, err := s.CreateComment(ctx, task.ID, NewComment{Body: "fine", Kind: CommentReview}); err != nil {
			t.Fatal(err)
		}
		list, total, _, err := s.ListComments(ctx, task.ID, Page{})
		if err != nil || len(list) != 3 || total != 3 || list[0].ID != c.ID {
			t.Fatalf("comments %+v %d %v", list, total, err)
		}
		if err := s.DeleteComment(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteComment(ctx, c.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if got, _ := s.GetTask(ctx, task.ID); got.Status != TaskDone {
			t.Fatalf("deleting a review undid its decision: %s", got.Status)
		}
	})
}
