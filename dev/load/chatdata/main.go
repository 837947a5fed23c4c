// Command chatdata seeds a gateway's SQLite database with a large ledger and
// many sessions, for the chat path's throughput-vs-data-size measurement
// (dev/load/chat-datasize.sh, issue 15). It opens the database the way the
// gateway does (migrating the schema), then inserts finished, priced ledger
// rows spread over the last 30 days, and sessions with an action-log row and
// two messages each.
//
//	go run ./dev/load/chatdata -db <workspace>/data/agentry.db -ledger 1000000 -sessions 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

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

const batch = 5000 // rows per transaction

func seed(ctx context.Context, path string, ledger, sessions int) error {
	st, err := models.Open(ctx, models.Options{Driver: models.DriverSQLite, DSN: path})
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC()
	start := time.Now()
	for from := 0; from < ledger; from += batch {
		rows := make([]models.LedgerEntry, 0, batch)
		for i := from; i < min(from+batch, ledger); i++ {
			at := now.Add(-time.Duration(i%(30*24*60)) * time.Minute)
			fin := at.Add(800 * time.Millisecond)
			rows = append(rows, models.LedgerEntry{CallID: fmt.Sprintf("seed-call-%d", i), Subject: "seed", AgentID: "bench",
				SessionID: fmt.Sprintf("seed-session-%d", i%max(sessions, 1)), RunID: fmt.Sprintf("seed-run-%d", i), Source: "chat",
				Trigger: "api", Provider: "fake", Model: "gpt-4o-mini", ResponseModel: "gpt-4o-mini", Outcome: "success",
				FinishReason: "stop", InputTokens: 20, OutputTokens: 10, EstimatedInputTokens: 20, MaxOutputTokens: 4096,
				PricingStatus: "priced", PriceVersion: "1", PriceSource: "bench", PriceEffectiveDate: "2026-01-01", CostMicros: 9,
				CostUSD: 0.000009, Mode: "hard", Attempts: 1, Executions: 1, CreatedAt: at, StartedAt: at, FinishedAt: &fin, UpdatedAt: fin})
		}
		if err := st.DB.WithContext(ctx).CreateInBatches(rows, 200).Error; err != nil {
			return fmt.Errorf("ledger rows: %w", err)
		}
	}
	fmt.Printf("ledger: %d rows in %s\n", ledger, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	for from := 0; from < sessions; from += batch {
		var ss []models.ChatSession
		var runs []models.AgentRun
		var msgs []models.ChatMessage
		for i := from; i < min(from+batch, sessions); i++ {
			at := now.Add(-time.Duration(i%(30*24*60)) * time.Minute)
			fin := at.Add(time.Second)
			id, run := fmt.Sprintf("seed-session-%d", i), fmt.Sprintf("seed-run-%d", i)
			ss = append(ss, models.ChatSession{ID: id, AgentID: "bench", Subject: "seed", UserID: fmt.Sprintf("seed-%d", i),
				Username: "seed", Source: "chat", CreatedAt: at, UpdatedAt: fin})
			runs = append(runs, models.AgentRun{RunID: run, ResponseID: "resp-" + run, AgentID: "bench", SessionID: id, Subject: "seed",
				Source: "chat", Provider: "fake", Model: "gpt-4o-mini", Status: "finished", Turns: 1, InputTokens: 20, OutputTokens: 10,
				StartedAt: at, FinishedAt: &fin})
			msgs = append(msgs, models.ChatMessage{SessionID: id, Seq: 1, RunID: run, Role: "user", Content: "Hello, how are you today?", CreatedAt: at},
				models.ChatMessage{SessionID: id, Seq: 2, RunID: run, Role: "assistant", Content: "Fine, thanks.", CreatedAt: fin})
		}
		db := st.DB.WithContext(ctx)
		if err := db.CreateInBatches(ss, 200).Error; err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		if err := db.CreateInBatches(runs, 200).Error; err != nil {
			return fmt.Errorf("action log: %w", err)
		}
		if err := db.CreateInBatches(msgs, 200).Error; err != nil {
			return fmt.Errorf("messages: %w", err)
		}
	}
	fmt.Printf("sessions: %d (with %d messages) in %s\n", sessions, 2*sessions, time.Since(start).Round(time.Millisecond))
	return nil
}
