package models

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// literalTestSQL has one parameter of each mode.
const literalTestSQL = `INSERT INTO lit (id, a, b, c, d) VALUES (?, ?, ?, ?, ?)`

// literalTestStmt returns a statement of literalTestSQL with no variant yet.
func literalTestStmt() *literalSQL {
	return newLiteralSQL(literalTestSQL, bindValue, inlineValue, inlineValue, inlineIfZero, inlineIfZero)
}

func literalTestDB(t *testing.T) *sql.DB {
	t.Helper()
	st := mustOpen(t, Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "lit.db")})
	t.Cleanup(func() { st.Close() })
	db, err := st.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE lit (id INTEGER, a TEXT, b NUMERIC, c, d)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// A row written through a literal statement is the row binding writes:
// same values, same storage classes, whatever the strings hold.
func TestLiteralSQLStoresWhatBindingStores(t *testing.T) {
	db := literalTestDB(t)
	c := literalTestStmt()
	for i, args := range [][]any{
		{"agent", true, "", int64(0)},
		{"O'Brien '' ; DROP TABLE lit; --", false, int64(0), false},
		{"", int64(7), "set", int64(3)},        // non-zero: bound
		{"nul\x00inside", "5", 0, "x"},         // NUL: bound
		{"bad utf-8 \xff", 1, "", true},        // invalid UTF-8: bound
		{strings.Repeat("l", 129), "é", "", 0}, // too long: bound
		{"ünïcödé ✓", "12.5", "", 2.5},         // a float: bound
	} {
		bound := append([]any{int64(2 * i)}, args...)
		if _, err := db.Exec(literalTestSQL, bound...); err != nil {
			t.Fatalf("row %d bound: %v", i, err)
		}
		spelled := append([]any{int64(2*i + 1)}, args...)
		q, rest := c.specialize(spelled)
		if _, err := db.Exec(q, rest...); err != nil {
			t.Fatalf("row %d literal (%s): %v", i, q, err)
		}
	}
	rows, err := db.Query(`SELECT id, typeof(a), a, typeof(b), b, typeof(c), c, typeof(d), d FROM lit ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][]any
	for rows.Next() {
		v := make([]any, 9)
		p := make([]any, 9)
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if len(got) != 14 {
		t.Fatalf("%d rows, want 14", len(got))
	}
	for i := 0; i < len(got); i += 2 {
		if b, l := got[i][1:], got[i+1][1:]; !reflect.DeepEqual(b, l) {
			t.Errorf("row %d: bound %v, literal %v", i/2, b, l)
		}
	}
}

// Values that may be spelled are, and the statement binds only the rest.
func TestLiteralSQLSpellsWhatItMay(t *testing.T) {
	c := literalTestStmt()
	args := []any{int64(1), "it's", true, "", int64(9)}
	q, rest := c.specialize(args)
	if want := `INSERT INTO lit (id, a, b, c, d) VALUES (?, 'it''s', 1, '', ?)`; q != want {
		t.Fatalf("text %q, want %q", q, want)
	}
	if !reflect.DeepEqual(rest, []any{int64(1), int64(9)}) {
		t.Fatalf("bound %v", rest)
	}
	// The same values find the same text; other ones another.
	q2, _ := c.specialize([]any{int64(2), "it's", true, "", int64(10)})
	q3, _ := c.specialize([]any{int64(3), "its", true, "", int64(10)})
	if q2 != q || q3 == q {
		t.Fatalf("texts %q %q %q", q, q2, q3)
	}
	// A string and an integer that read alike are different texts.
	qs, _ := c.specialize([]any{int64(4), "1", "x", "", int64(0)})
	qi, _ := c.specialize([]any{int64(5), int64(1), "x", "", int64(0)})
	if qs == qi {
		t.Fatalf("the string \"1\" and the integer 1 share the text %q", qs)
	}
	// A value of a type never spelled (here []byte, which cannot even be
	// compared) where the last text spelled a string is bound.
	q, rest = c.specialize([]any{int64(7), []byte("x"), true, "", int64(0)})
	if strings.Contains(q, "'x'") || len(rest) != 2 {
		t.Fatalf("text %q with %d arguments", q, len(rest))
	}
	// Nothing to spell: the plain statement, args untouched.
	args = []any{int64(6), strings.Repeat("x", maxLiteralLen+1), 1.5, "y", int64(1)}
	q, rest = c.specialize(args)
	if q != literalTestSQL || len(rest) != 5 {
		t.Fatalf("text %q with %d arguments", q, len(rest))
	}
}

// A statement has at most maxLiteralVariants texts; values seen after that
// are bound, and the texts already made still serve.
func TestLiteralSQLVariantsAreBounded(t *testing.T) {
	c := literalTestStmt()
	for i := range maxLiteralVariants {
		q, _ := c.specialize([]any{int64(i), fmt.Sprintf("agent-%d", i), true, "", int64(0)})
		if q == literalTestSQL {
			t.Fatalf("variant %d not made", i)
		}
	}
	q, rest := c.specialize([]any{int64(0), "one too many", true, "", int64(0)})
	if q != literalTestSQL || len(rest) != 5 {
		t.Fatalf("past the bound: text %q with %d arguments", q, len(rest))
	}
	if q, _ := c.specialize([]any{int64(0), "agent-3", true, "", int64(0)}); q == literalTestSQL {
		t.Fatal("a variant made before the bound is no longer used")
	}
	if n := len(c.variants); n != maxLiteralVariants {
		t.Fatalf("%d variants", n)
	}
}

func TestNewLiteralSQLChecksItsModes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a statement with more parameters than modes was accepted")
		}
	}()
	newLiteralSQL(literalTestSQL, bindValue)
}

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
	for _, s := range []*literalSQL{insertSessionLiteral, insertRunLiteral} {
		if !hasVariantSpelling(s, `'O''Brien'`) {
			t.Fatalf("the writer ran %q without spelling the agent", firstWords(s.query))
		}
	}
}

func hasVariantSpelling(s *literalSQL, literal string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.variants {
		if strings.Contains(v.query, literal) {
			return true
		}
	}
	return false
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
					q, args = settledRowLiteral.specialize(args)
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
