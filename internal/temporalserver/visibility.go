package temporalserver

import (
	"database/sql"
	"fmt"
	"strings"

	enums "go.temporal.io/api/enums/v1"
)

// Temporal's SQLite visibility table (executions_visibility) carries 58
// indexes, most of them on search-attribute columns a single-node Agentry
// installation never filters by: the pre-allocated columns of CHASM
// components, system attributes of features it does not use, and the
// pre-allocated custom columns of types no registered attribute has. Every
// visibility write (three per workflow run: start, the build-id upsert after
// the first workflow task, close) updates all of them, and compiling the
// write statement, which the SQLite plugin does anew each time, costs in
// proportion; with the whole set it was the largest single cost of a task
// run (about 15 ms of CPU per run, a fifth of the gateway's). Dropping the
// indexes below halves that (docs/benchmarks/2026-11-history.md, "Throughput of task runs").
//
// Nothing but speed depends on them: a visibility query filtering by such a
// column (an operator's `temporal workflow list --query`, the Web UI) scans
// the table instead, with the same results. The drops are applied on every
// start (IF EXISTS: idempotent), so a database created before this change
// sheds them too. Indexes that keep the Web UI's list and its common filters
// fast stay: the default ordering, workflow id, type, status, task queue,
// execution time, schedules (namespace division, scheduled-by id), and every
// custom column of a type a registered search attribute has (Temporal maps
// attributes to columns in no fixed order, so all columns of a used type).
var droppedVisibilityIndexes = []string{
	// Pre-allocated columns of CHASM components (standalone activities,
	// the CHASM scheduler), which Agentry does not use.
	"by_temporal_bool_01", "by_temporal_bool_02", "by_temporal_datetime_01", "by_temporal_datetime_02",
	"by_temporal_double_01", "by_temporal_double_02", "by_temporal_int_01", "by_temporal_int_02",
	"by_temporal_keyword_01", "by_temporal_keyword_02", "by_temporal_keyword_03", "by_temporal_keyword_04",
	"by_temporal_low_cardinality_keyword_01",
	// System attributes of batch jobs, pausing and worker deployments
	// (worker versioning), and columns filtered by rarely if ever.
	"by_batcher_user", "by_temporal_scheduled_start_time", "by_temporal_schedule_paused",
	"by_temporal_pause_info", "by_temporal_worker_deployment_version",
	"by_temporal_workflow_versioning_behavior", "by_temporal_worker_deployment",
	"by_history_length", "by_history_size_bytes", "by_execution_duration", "by_state_transition_count",
	"by_parent_workflow_id", "by_parent_run_id", "by_root_workflow_id", "by_root_run_id",
}

// customIndexes are the indexes of the pre-allocated custom search-attribute
// columns, by the attribute type the columns hold.
var customIndexes = map[enums.IndexedValueType][]string{
	enums.INDEXED_VALUE_TYPE_BOOL:     {"by_bool_01", "by_bool_02", "by_bool_03"},
	enums.INDEXED_VALUE_TYPE_DATETIME: {"by_datetime_01", "by_datetime_02", "by_datetime_03"},
	enums.INDEXED_VALUE_TYPE_DOUBLE:   {"by_double_01", "by_double_02", "by_double_03"},
	enums.INDEXED_VALUE_TYPE_INT:      {"by_int_01", "by_int_02", "by_int_03"},
	enums.INDEXED_VALUE_TYPE_KEYWORD: {"by_keyword_01", "by_keyword_02", "by_keyword_03", "by_keyword_04", "by_keyword_05",
		"by_keyword_06", "by_keyword_07", "by_keyword_08", "by_keyword_09", "by_keyword_10"},
}

// unusedVisibilityIndexes lists the indexes trimVisibilityIndexes drops for
// the registered search attributes attrs.
func unusedVisibilityIndexes(attrs map[string]enums.IndexedValueType) []string {
	used := map[enums.IndexedValueType]bool{}
	for _, t := range attrs {
		used[t] = true
	}
	out := append([]string(nil), droppedVisibilityIndexes...)
	for _, t := range []enums.IndexedValueType{enums.INDEXED_VALUE_TYPE_BOOL, enums.INDEXED_VALUE_TYPE_DATETIME,
		enums.INDEXED_VALUE_TYPE_DOUBLE, enums.INDEXED_VALUE_TYPE_INT, enums.INDEXED_VALUE_TYPE_KEYWORD} {
		if !used[t] {
			out = append(out, customIndexes[t]...)
		}
	}
	return out
}

// trimVisibilityIndexes drops the visibility indexes nothing here needs (see
// droppedVisibilityIndexes). It runs before the server opens the file, on a
// connection of its own that it closes (the plugin's are cached for the life
// of the process), in one transaction.
func trimVisibilityIndexes(path string, attrs map[string]enums.IndexedValueType) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var b strings.Builder
	b.WriteString("BEGIN;\n")
	for _, name := range unusedVisibilityIndexes(attrs) {
		fmt.Fprintf(&b, "DROP INDEX IF EXISTS %s;\n", name)
	}
	b.WriteString("COMMIT;\n")
	if _, err := db.Exec(b.String()); err != nil {
		return fmt.Errorf("trim visibility indexes of %s: %w", path, err)
	}
	return nil
}
