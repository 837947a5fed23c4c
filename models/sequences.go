package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Ids are never reused. Task, run, comment, artifact, event and other
// integer ids reach workflow ids (task-<id>), artifact folders, URLs and
// event dedupe keys (run.started:<run id>), so an id handed out twice
// would collide with what the first holder left behind. PostgreSQL
// sequences never go back. SQLite tables are created with AUTOINCREMENT,
// whose high-water mark lives in sqlite_sequence - and GORM's SQLite
// migrator rebuilds a table (copy, drop, rename) when it alters a column,
// which resets that mark to the largest id still present: after the newest
// task was deleted, the next start handed its id out again. Two guards:
//
//   - keepSQLiteSequences wraps AutoMigrate and puts every mark back to at
//     least where it was;
//   - data migration 2 raises the marks of tasks and task_runs past every
//     id the events table has seen, repairing databases that were already
//     reset.

// sqliteSequences reads sqlite_sequence (table name -> high-water mark);
// empty before the first AUTOINCREMENT table exists.
func sqliteSequences(tx *gorm.DB) (map[string]int64, error) {
	var n int64
	if err := tx.Raw("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'").Scan(&n).Error; err != nil {
		return nil, fmt.Errorf("look for sqlite_sequence: %w", err)
	}
	out := map[string]int64{}
	if n == 0 {
		return out, nil
	}
	var rows []struct {
		Name string
		Seq  int64
	}
	if err := tx.Raw("SELECT name, seq FROM sqlite_sequence").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read sqlite_sequence: %w", err)
	}
	for _, r := range rows {
		out[r.Name] = max(out[r.Name], r.Seq)
	}
	return out, nil
}

// raiseSQLiteSequence makes sure table's AUTOINCREMENT mark is at least
// seq (the next id is then above it).
func raiseSQLiteSequence(tx *gorm.DB, table string, seq int64) error {
	if seq <= 0 {
		return nil
	}
	if err := tx.Exec("UPDATE sqlite_sequence SET seq = ? WHERE name = ? AND seq < ?", seq, table, seq).Error; err != nil {
		return fmt.Errorf("raise id sequence of %s: %w", table, err)
	}
	err := tx.Exec("INSERT INTO sqlite_sequence (name, seq) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = ?)",
		table, seq, table).Error
	if err != nil {
		return fmt.Errorf("raise id sequence of %s: %w", table, err)
	}
	return nil
}

// keepSQLiteSequences runs fn (AutoMigrate) and then restores every
// AUTOINCREMENT mark that fn lowered or dropped.
func keepSQLiteSequences(tx *gorm.DB, fn func() error) error {
	before, err := sqliteSequences(tx)
	if err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	for table, seq := range before {
		var exists int64
		if err := tx.Raw("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&exists).Error; err != nil {
			return err
		}
		if exists == 0 {
			continue
		}
		if err := raiseSQLiteSequence(tx, table, seq); err != nil {
			return err
		}
	}
	return nil
}

// raiseIDSequences is data migration 2: on SQLite, the id sequences of
// tasks and task runs move past every id events have seen, so an id is never
// given twice.
func raiseIDSequences(_ context.Context, tx *gorm.DB, driver string) error {
	if driver != DriverSQLite {
		return nil // PostgreSQL sequences never go back
	}
	for _, s := range []struct{ table, eventsColumn string }{{"tasks", "task_id"}, {"task_runs", "run_id"}} {
		var high int64
		q := fmt.Sprintf("SELECT MAX(m) FROM (SELECT COALESCE(MAX(id), 0) AS m FROM %s UNION ALL SELECT COALESCE(MAX(%s), 0) FROM events)",
			s.table, s.eventsColumn)
		if err := tx.Raw(q).Scan(&high).Error; err != nil {
			return fmt.Errorf("highest %s id: %w", s.table, err)
		}
		if err := raiseSQLiteSequence(tx, s.table, high); err != nil {
			return err
		}
	}
	return nil
}
