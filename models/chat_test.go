package models

import (
	"context"
	"testing"
)

// An existing database gets the agent_runs indexes no query uses dropped
// (each is one more page every chat request's commit writes).
func TestMigrationsDropTheUnusedAgentRunIndexes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		old := mustOpen(t, opts)
		// A database from before data migrations 3 and 4.
		for _, stmt := range []string{
			"CREATE INDEX idx_agent_runs_agent_id ON agent_runs (agent_id)",
			"CREATE INDEX idx_agent_runs_session_id ON agent_runs (session_id)",
			"CREATE UNIQUE INDEX idx_agent_runs_response_id ON agent_runs (response_id)",
			"DELETE FROM schema_migrations WHERE version >= 3",
		} {
			if err := old.DB.WithContext(ctx).Exec(stmt).Error; err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if !old.DB.Migrator().HasIndex(&AgentRun{}, "idx_agent_runs_response_id") {
			t.Fatal("the old database has no response_id index to drop")
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		s := mustOpen(t, opts)
		for _, idx := range []string{"idx_agent_runs_agent_id", "idx_agent_runs_session_id", "idx_agent_runs_response_id"} {
			if s.DB.Migrator().HasIndex(&AgentRun{}, idx) {
				t.Errorf("%s still exists after Open", idx)
			}
		}
		assertMigrationsRecordedOnce(t, s)
	})
}
