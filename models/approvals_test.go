package models

import (
	"context"
	"testing"
	"time"
)

// A firing's approval names its schedule, not a task: asking parks the
// firing's record (waiting for approval), deciding resumes it, the list
// filters by schedule, and a firing that ends while still waiting leaves
// its approval cancelled.
func TestFiringApprovalParksTheFiringRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		s := mustOpen(t, opts)
		ctx := context.Background()
		now := time.Now().UTC()
		const wid = "agentry:schedule:weekly-2026-11-23T09:00:00Z"
		if err := s.SaveScheduleRun(ctx, &ScheduleRun{WorkflowID: wid, AgentID: "weekly", Trigger: "cron", Status: ScheduleRunRunning}); err != nil {
			t.Fatal(err)
		}
		ask := func(key string) *Approval {
			t.Helper()
			ap, err := s.RequestApproval(ctx, Approval{Key: key, AgentID: "weekly", WorkflowID: wid, ScheduleID: "agentry:schedule:weekly",
				Tool: "write_file", CallID: "c1", Arguments: `{"path":"a.md"}`, RequestedAt: now, ExpiresAt: now.Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			return ap
		}
		firing := func() ScheduleRun {
			t.Helper()
			last, err := s.LastScheduleRuns(ctx, []string{"weekly"})
			if err != nil {
				t.Fatal(err)
			}
			return last["weekly"]
		}
		ap := ask(wid + "-a1-s1-0")
		if r := firing(); r.Status != ScheduleRunWaiting || r.WaitingFor != WaitingForApproval {
			t.Fatalf("firing while parked: %+v", r)
		}
		if _, err := s.RequestApproval(ctx, Approval{Key: "task-1-a1-s1-0", TaskID: 1, RunID: 1, AgentID: "weekly", WorkflowID: "task-1",
			Tool: "write_file", RequestedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		rows, _, err := s.ListApprovals(ctx, ApprovalFilter{Schedule: "weekly"})
		if err != nil || len(rows) != 1 || rows[0].ID != ap.ID {
			t.Fatalf("by schedule: %+v %v", rows, err)
		}
		if _, err := s.ResolveApproval(ctx, ap.ID, ApprovalApproved, "olga", "", now); err != nil {
			t.Fatal(err)
		}
		if r := firing(); r.Status != ScheduleRunRunning || r.WaitingFor != "" {
			t.Fatalf("firing after the decision: %+v", r)
		}
		second := ask(wid + "-a1-s3-0")
		if err := s.FinishScheduleRun(ctx, ScheduleRun{WorkflowID: wid, AgentID: "weekly", Status: ScheduleRunFailed, Error: "cancelled"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetApproval(ctx, second.ID); got.Status != ApprovalCancelled {
			t.Fatalf("approval of an ended firing: %+v", got)
		}
		if got, _ := s.GetApproval(ctx, ap.ID); got.Status != ApprovalApproved {
			t.Fatalf("decided approval changed: %+v", got)
		}
		if r := firing(); r.Status != ScheduleRunFailed || r.WaitingFor != "" {
			t.Fatalf("ended firing: %+v", r)
		}
	})
}
