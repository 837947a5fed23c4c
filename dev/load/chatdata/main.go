// Command chatdata seeds a gateway's SQLite database with a large ledger and
// many sessions, for the chat path's throughput-vs-data-size measurement
// (dev/load/chat-datasize.sh, issue 15). It opens the database the way the
// gateway does (migrating the schema), then inserts finished, priced ledger
// rows spread over the last 30 days, and sessions with an action-log row and
// two messages each.
//
// One prototype row per table is written through GORM, so every column holds
// exactly what the gateway itself would store; SQLite then copies it with a
// recursive counter, changing only the ids and times. That seeds a million
// ledger rows in well under a minute (row-by-row inserts through GORM ran at
// about 1,400 rows/s, 13 minutes for the sizes).
//
//	go run ./dev/load/chatdata -db <workspace>/data/agentry.db -ledger 1000000 -sessions 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/agentryhq/agentry/models"
)

func main() {
	dbPath := flag.String("db", "", "the SQLite file (the gateway's <workspace>/data/agentry.db)")
	ledger := flag.Int("ledger", 0, "ledger rows to add")
	sessions := flag.Int("sessions", 0, "sessions to add (each with one action-log row and two messages)")
	flag.Parse()
	if *dbPath == "" {
		fmt.Fprintln(os.Stderr, "chatdata: -db is required")
		os.Exit(2)
	}
	if err := seed(context.Background(), *dbPath, *ledger, *sessions); err != nil {
		fmt.Fprintln(os.Stderr, "chatdata:", err)
		os.Exit(1)
	}
}

const batch = 50_000 // rows per transaction

// Times are stored the way the driver writes a time.Time; the rows spread
// over 30 days (43,200 minutes) back from now.
const (
	at       = `strftime('%Y-%m-%d %H:%M:%S', @now, '-' || (i % 43200) || ' minutes')`
	atStored = at + ` || '.000000000 +0000 UTC'`
)

func seed(ctx context.Context, path string, ledger, sessions int) error {
	st, err := models.Open(ctx, models.Options{Driver: models.DriverSQLite, DSN: path})
	if err != nil {
		return err
	}
	defer st.Close()
	db := st.DB.WithContext(ctx)
	now := time.Now().UTC()
	start := time.Now()
	proto := now
	fin := proto.Add(800 * time.Millisecond)
	if ledger > 0 {
		if err := db.Create(&models.LedgerEntry{CallID: "seed-proto", Subject: "seed", AgentID: "bench",
			SessionID: "seed-proto", RunID: "seed-proto", Source: "chat",
			Trigger: "api", Provider: "fake", Model: "gpt-4o-mini", ResponseModel: "gpt-4o-mini", Outcome: "success",
			FinishReason: "stop", InputTokens: 20, OutputTokens: 10, EstimatedInputTokens: 20, MaxOutputTokens: 4096,
			PricingStatus: "priced", PriceVersion: "1", PriceSource: "bench", PriceEffectiveDate: "2026-01-01", CostMicros: 9,
			CostUSD: 0.000009, Mode: "hard", Attempts: 1, Executions: 1, CreatedAt: proto, StartedAt: proto, FinishedAt: &fin, UpdatedAt: fin}).Error; err != nil {
			return fmt.Errorf("ledger prototype: %w", err)
		}
		err := copyRows(db, now, "cost_ledger", "call_id = 'seed-proto'", ledger, map[string]string{
			"call_id":     `'seed-call-' || i`,
			"session_id":  fmt.Sprintf(`'seed-session-' || (i %% %d)`, max(sessions, 1)),
			"run_id":      `'seed-run-' || i`,
			"created_at":  atStored,
			"started_at":  atStored,
			"finished_at": at + ` || '.800000000 +0000 UTC'`,
			"updated_at":  at + ` || '.800000000 +0000 UTC'`,
		})
		if err != nil {
			return fmt.Errorf("ledger rows: %w", err)
		}
	}
	fmt.Printf("ledger: %d rows in %s\n", ledger, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if sessions > 0 {
		fin := proto.Add(time.Second)
		if err := db.Create(&models.ChatSession{ID: "seed-proto", AgentID: "bench", Subject: "seed", UserID: "seed-proto",
			Username: "seed", Source: "chat", CreatedAt: proto, UpdatedAt: fin, Key: -1}).Error; err != nil {
			return fmt.Errorf("session prototype: %w", err)
		}
		if err := db.Create(&models.AgentRun{RunID: "seed-proto", ResponseID: "resp-seed-proto", AgentID: "bench", SessionID: "seed-proto",
			Subject: "seed", Source: "chat", Provider: "fake", Model: "gpt-4o-mini", Status: "finished", Turns: 1, InputTokens: 20,
			OutputTokens: 10, StartedAt: proto, FinishedAt: &fin}).Error; err != nil {
			return fmt.Errorf("action log prototype: %w", err)
		}
		if err := db.Create(&[]models.ChatMessage{
			{SessionID: "seed-proto", SessionKey: -1, Seq: 1, RunID: "seed-proto", Role: "user", Content: "Hello, how are you today?", CreatedAt: proto},
			{SessionID: "seed-proto", SessionKey: -1, Seq: 2, RunID: "seed-proto", Role: "assistant", Content: "Fine, thanks.", CreatedAt: fin},
		}).Error; err != nil {
			return fmt.Errorf("message prototypes: %w", err)
		}
		later := at + ` || '.000000000 +0000 UTC'`
		laterPlus := `strftime('%Y-%m-%d %H:%M:%S', @now, '-' || (i % 43200) || ' minutes', '+1 seconds') || '.000000000 +0000 UTC'`
		steps := []struct {
			table, where string
			subs         map[string]string
		}{
			{"chat_sessions", "session_key = -1", map[string]string{
				"id": `'seed-session-' || i`, "session_key": "i + 1", "user_id": `'seed-' || i`, "created_at": later, "updated_at": laterPlus}},
			{"agent_runs", "run_id = 'seed-proto'", map[string]string{
				"run_id": `'seed-run-' || i`, "response_id": `'resp-seed-run-' || i`, "session_id": `'seed-session-' || i`,
				"started_at": later, "finished_at": laterPlus}},
			{"chat_messages", "session_key = -1 AND seq = 1", map[string]string{
				"id": "NULL", "session_id": `'seed-session-' || i`, "session_key": "i + 1", "run_id": `'seed-run-' || i`, "created_at": later}},
			{"chat_messages", "session_key = -1 AND seq = 2", map[string]string{
				"id": "NULL", "session_id": `'seed-session-' || i`, "session_key": "i + 1", "run_id": `'seed-run-' || i`, "created_at": laterPlus}},
		}
		for _, s := range steps {
			if err := copyRows(db, now, s.table, s.where, sessions, s.subs); err != nil {
				return fmt.Errorf("%s: %w", s.table, err)
			}
		}
	}
	fmt.Printf("sessions: %d (with %d messages) in %s\n", sessions, 2*sessions, time.Since(start).Round(time.Millisecond))
	return nil
}

// copyRows inserts n copies of the prototype row (table WHERE where), the
// i-th copy (0-based) taking subs' SQL expressions of i for the columns it
// names, then deletes the prototype. Each batch is one transaction.
func copyRows(db *gorm.DB, now time.Time, table, where string, n int, subs map[string]string) error {
	var cols []struct{ Name string }
	if err := db.Raw("SELECT name FROM pragma_table_info(?)", table).Scan(&cols).Error; err != nil {
		return err
	}
	names, exprs := make([]string, len(cols)), make([]string, len(cols))
	for k, c := range cols {
		names[k] = `"` + c.Name + `"`
		exprs[k] = names[k]
		if e, ok := subs[c.Name]; ok {
			exprs[k] = e
		}
	}
	q := fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT @from UNION ALL SELECT i + 1 FROM n WHERE i + 1 < @to)
INSERT INTO %s (%s) SELECT %s FROM n, %s WHERE %s`,
		table, strings.Join(names, ", "), strings.Join(exprs, ", "), table, where)
	stamp := now.Format("2006-01-02 15:04:05")
	for from := 0; from < n; from += batch {
		args := map[string]any{"now": stamp, "from": from, "to": min(from+batch, n)}
		if err := db.Exec(q, args).Error; err != nil {
			return err
		}
	}
	return db.Exec(fmt.Sprintf("DELETE FROM %s WHERE %s", table, where)).Error
}
