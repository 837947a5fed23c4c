package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// VectorChunk is one passage of a knowledge document with its embedding:
// the table of the vector stores on the gateway's own database
// (internal/vector/sqlite, internal/vector/postgres; vector.backend).
//
// A document is written in versions: the chunks of a version are staged
// (Published false, invisible to searches), then publishing the version
// deletes every other version's chunks and sets Published, in one
// transaction. The full-text index beside the table is created by data
// migration 13 (createVectorSearch): an FTS5 table kept by triggers on
// SQLite, a generated tsvector column with a GIN index on PostgreSQL.
type VectorChunk struct {
	ID       int64  `gorm:"primaryKey;autoIncrement"`
	Base     string `gorm:"size:191;not null;uniqueIndex:idx_vector_chunks_slot,priority:1;index:idx_vector_chunks_search,priority:1"`
	Document string `gorm:"size:1024;not null;uniqueIndex:idx_vector_chunks_slot,priority:2"`
	Version  string `gorm:"size:191;not null;uniqueIndex:idx_vector_chunks_slot,priority:3"`
	Position int    `gorm:"not null;uniqueIndex:idx_vector_chunks_slot,priority:4"`
	// Published is set on the chunks of a document's visible version.
	Published bool   `gorm:"not null;default:false;index:idx_vector_chunks_search,priority:2"`
	Text      string `gorm:"type:text;not null"`
	// Dim is the number of float32s in Vec (0: no embedding).
	Dim int `gorm:"not null;default:0"`
	// Vec is the embedding as little-endian float32s (vector.EncodeVector).
	Vec []byte `gorm:"not null"`
}

func (VectorChunk) TableName() string { return "vector_chunks" }

// VectorFTSTable is SQLite's FTS5 index of vector_chunks.text (external
// content: it keeps the index, the text stays in vector_chunks).
const VectorFTSTable = "vector_chunks_fts"

// createVectorSearch is data migration 13: the full-text side of the vector
// store. SQLite: an FTS5 table over vector_chunks.text (unicode61, diacritics
// folded) kept in step by triggers, so every write path (stage, publish,
// delete) updates it in its own transaction. PostgreSQL: a stored generated
// tsvector column ('simple' configuration: no stemming, like SQLite's
// tokenizer, so the two backends find the same words) with a GIN index.
func createVectorSearch(_ context.Context, tx *gorm.DB, driver string) error {
	var stmts []string
	switch driver {
	case DriverSQLite:
		stmts = VectorSQLiteDDL
	case DriverPostgres:
		stmts = []string{
			`ALTER TABLE vector_chunks ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED`,
			`CREATE INDEX IF NOT EXISTS idx_vector_chunks_tsv ON vector_chunks USING GIN (tsv)`,
		}
	default:
		return fmt.Errorf("unknown driver %q", driver)
	}
	for _, s := range stmts {
		if err := tx.Exec(s).Error; err != nil {
			return err
		}
	}
	return nil
}

// VectorSQLiteDDL creates SQLite's FTS5 index of vector_chunks and its
// triggers; every statement is idempotent (the SQLite store checks them
// again when it opens, in case a table rebuild dropped the triggers).
var VectorSQLiteDDL = []string{
	`CREATE VIRTUAL TABLE IF NOT EXISTS vector_chunks_fts USING fts5(text, content='vector_chunks', content_rowid='id', tokenize='unicode61 remove_diacritics 2')`,
	`CREATE TRIGGER IF NOT EXISTS vector_chunks_fts_ai AFTER INSERT ON vector_chunks BEGIN
		INSERT INTO vector_chunks_fts(rowid, text) VALUES (new.id, new.text);
	END`,
	`CREATE TRIGGER IF NOT EXISTS vector_chunks_fts_ad AFTER DELETE ON vector_chunks BEGIN
		INSERT INTO vector_chunks_fts(vector_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
	END`,
	`CREATE TRIGGER IF NOT EXISTS vector_chunks_fts_au AFTER UPDATE OF text ON vector_chunks BEGIN
		INSERT INTO vector_chunks_fts(vector_chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
		INSERT INTO vector_chunks_fts(rowid, text) VALUES (new.id, new.text);
	END`,
}

// SettledRead marks ctx for reads that need nothing SQLite's group-commit
// writer holds uncommitted: the vector store's searches (its rows are
// written on pool connections, never by that writer), so a search does not
// end the writer's lingering transaction for the chat path. A no-op on
// PostgreSQL.
func SettledRead(ctx context.Context) context.Context { return sqlitewriter.SettledRead(ctx) }
