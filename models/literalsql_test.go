package models

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// The exchange's rows, written through the writer's literal statements,
// read back as they were given (the writer's raw path: a store with its
// redo log).
func TestExchangeThroughLiteralStatements(t *testing.T) {
	ctx := context.Background()
	st := mustOpen(t, Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "x.db")})
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Second)
	for i, name := range []string{"O'Brien", "plain"} {
		sess := &ChatSession{ID: fmt.Sprintf("s-%d", i), AgentID: name, Subject: "sub", UserID: "u", Source: "chat"}
		run := &AgentRun{RunID: fmt.Sprintf("r-%d", i), AgentID: name, SessionID: sess.ID, Status: "ok", Turns: 1, StartedAt: now, FinishedAt: &now}
		msgs := []ChatMessage{{RunID: run.RunID, Role: "user", Content: "hi"}, {RunID: run.RunID, Role: "assistant", Content: "it's me", Name: name}}
		if err := st.SaveExchange(ctx, sess, run, msgs); err != nil {
			t.Fatal(err)
		}
		var got []ChatMessage // from the table, not the history cache
		if err := st.DB.Raw(`SELECT role, content, name, tool_calls, seq FROM chat_messages WHERE session_id = ? ORDER BY seq`, sess.ID).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Role != "user" || got[1].Content != "it's me" || got[1].Name != name || got[1].ToolCalls != "" || got[1].Seq != 2 {
			t.Fatalf("messages %+v", got)
		}
		var agent string
		var turns int
		if err := st.DB.Raw(`SELECT agent_id, turns FROM agent_runs WHERE run_id = ?`, run.RunID).Row().Scan(&agent, &turns); err != nil || agent != name || turns != 1 {
			t.Fatalf("run row: %q %d %v", agent, turns, err)
		}
	}
	// The agent name is this test's own: only its writes spelled it.
	for _, s := range []*sqlitewriter.Literal{insertSessionLiteral, insertRunLiteral} {
		if !hasVariantSpelling(s, `'O''Brien'`) {
			t.Fatalf("the writer ran %q without spelling the agent", firstWords(s.Query()))
		}
	}
}

func hasVariantSpelling(s *sqlitewriter.Literal, literal string) bool {
	return s.HasVariantWith(literal)
}

// BenchmarkLiteralInsert: a settled ledger row (settledRowSQL) bound value
// by value, and as the writer runs it, with what the calls of one agent
// share written into the text (in transactions of 64 rows, as batches).
func BenchmarkLiteralInsert(b *testing.B) {
	for _, literal := range []bool{false, true} {
		b.Run(map[bool]string{false: "bound", true: "literal"}[literal], func(b *testing.B) {
			st := mustOpen(b, Options{Driver: DriverSQLite, DSN: filepath.Join(b.TempDir(), "bench.db")})
			defer st.Close()
			db, err := st.DB.DB()
			if err != nil {
				b.Fatal(err)
			}
			stmts := map[string]*sql.Stmt{}
			now := time.Now().UTC()
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%64 == 63 {
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					if tx, err = db.Begin(); err != nil {
						b.Fatal(err)
					}
				}
				e := pendingEntry(fmt.Sprintf("call-%d", i), now)
				e.AgentID, e.Workspace, e.RunID, e.SessionID = "bench", "/srv/agentry", fmt.Sprintf("run-%d", i), fmt.Sprintf("s-%d", i)
				args := settledRowArgs(e, Settlement{CallID: e.CallID, Outcome: OutcomeSucceeded, FinishReason: "stop", InputTokens: 12, OutputTokens: 8,
					CostMicros: 9, Attempts: 1, ProviderRequestID: "chatcmpl-1", AdmissionID: "a-" + e.CallID}, now)
				q := settledRowSQL
				if literal {
					q, args = settledRowLiteral.Specialize(args)
				}
				p := stmts[q]
				if p == nil {
					if p, err = db.Prepare(q); err != nil {
						b.Fatal(err)
					}
					stmts[q] = p
				}
				if _, err := tx.Stmt(p).Exec(args...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = tx.Commit()
		})
	}
}
