package models

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Issue 43: GET /memory?agent_id= filters chat sessions by agent; on
// SQLite the index exists and the query plan searches it instead of
// scanning every session.
func TestSessionsByAgentUseTheirIndex(t *testing.T) {
	opts := backends[0].opts(t)
	if opts.Driver != DriverSQLite {
		t.Fatal("backends[0] is not SQLite")
	}
	s := mustOpen(t, opts)
	ctx := context.Background()
	if !s.DB.Migrator().HasIndex(&ChatSession{}, sessionsByAgentIndex) {
		t.Fatalf("chat_sessions has no %s", sessionsByAgentIndex)
	}
	for i, agent := range []string{"a", "b", "a"} {
		sess := &ChatSession{ID: "s" + string(rune('0'+i)), AgentID: agent, Subject: "sub", UserID: "u", Source: "chat"}
		if err := s.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct updated_at, for the order below
	}
	got, err := s.ListSessionSummaries(ctx, "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SessionID != "s2" || got[1].SessionID != "s0" {
		t.Fatalf("sessions of a: %+v", got)
	}
	// The plan of ListSessionSummaries' query with an agent.
	rows, err := s.DB.Raw("EXPLAIN QUERY PLAN SELECT s.id FROM chat_sessions AS s WHERE s.agent_id = ? ORDER BY s.updated_at DESC, s.id LIMIT 10", "a").Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	joined := strings.Join(plan, "; ")
	if !strings.Contains(joined, "USING INDEX "+sessionsByAgentIndex) && !strings.Contains(joined, "USING COVERING INDEX "+sessionsByAgentIndex) {
		t.Fatalf("query plan %q does not use %s", joined, sessionsByAgentIndex)
	}
}
