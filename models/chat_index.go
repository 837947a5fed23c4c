package models

import (
	"context"

	"gorm.io/gorm"
)

// sessionsByAgentIndex serves GET /memory?agent_id=: an agent's sessions,
// newest first (ListSessionSummaries).
const sessionsByAgentIndex = "idx_chat_sessions_agent_updated"

// indexSessionsByAgent creates the index when AutoMigrate's was lost: data
// migration 7 rebuilds chat_sessions on SQLite after AutoMigrate ran, and
// the rebuilt table has only the indexes it copies.
func indexSessionsByAgent(_ context.Context, tx *gorm.DB, _ string) error {
	if tx.Migrator().HasIndex(&ChatSession{}, sessionsByAgentIndex) {
		return nil
	}
	return tx.Migrator().CreateIndex(&ChatSession{}, sessionsByAgentIndex)
}
