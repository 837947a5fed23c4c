package activities

import (
	"context"
	"log/slog"

	"github.com/agentryhq/agentry/workflows"
)

// archiveRun keeps a finished task run of an agent with memory searchable
// (memory.archive, docs/memory.md): its prompt and its reply, in the run's
// memory scope. It runs once, when the run's outcome is first recorded; a
// failure is logged and does not fail the finished run.
func (a *TaskRunActivities) archiveRun(ctx context.Context, snapshotSHA, reply string) {
	if a.Toolbox == nil || a.Toolbox.Memory == nil || a.Log == nil || snapshotSHA == "" {
		return
	}
	var snap workflows.RunSnapshot
	if err := a.Log.Snapshot(ctx, snapshotSHA, &snap); err != nil {
		slog.Warn("memory: archive a finished run: read its snapshot", "snapshot", snapshotSHA, "error", err)
		return
	}
	if snap.Memory == nil || !snap.Memory.Archive {
		return
	}
	if err := a.Toolbox.Memory.ArchiveConversation(ctx, *snap.Memory, "task: "+snap.Agent.UserText+"\nresult: "+reply); err != nil {
		slog.Warn("memory: archive a finished run", "agent", snap.Memory.AgentID, "source", snap.Memory.Source, "error", err)
	}
}
