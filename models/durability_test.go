package models

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// storage.sqlite.durability: power (Options.SyncToDisk) commits with
// synchronous=FULL and fsyncs the redo log and the admission journal before
// acknowledging, once per batch; process (the default) makes neither
// (issue 43).
func TestPowerDurabilitySyncsBeforeAcknowledging(t *testing.T) {
	for _, power := range []bool{false, true} {
		t.Run(fmt.Sprint("power=", power), func(t *testing.T) {
			ctx := context.Background()
			st := mustOpen(t, Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "a.db"), SyncToDisk: power})
			t.Cleanup(func() { st.Close() })
			var level int
			if err := st.DB.Raw("PRAGMA synchronous").Scan(&level).Error; err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 1, true: 2}[power]; level != want { // NORMAL 1, FULL 2
				t.Fatalf("synchronous = %d, want %d", level, want)
			}
			l, err := NewCostLedger(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			setLinger(t, st, time.Hour) // acknowledged from the redo log
			before := sqlitewriter.AckSyncs()
			now := time.Now().UTC()
			const n = 4
			for i := range n {
				sess := &ChatSession{ID: fmt.Sprintf("s%d", i), AgentID: "a", Subject: "alice", Source: "chat"}
				run := &AgentRun{RunID: fmt.Sprintf("r%d", i), AgentID: "a", SessionID: sess.ID, Status: "ok", StartedAt: now}
				if err := st.SaveExchange(ctx, sess, run, []ChatMessage{{Role: "user", Content: "hi"}}); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("c1", now), AdmissionID: "a-c1", WorstMicros: 40,
				ExpiresAt: now.Add(time.Hour)}); err != nil || !res.Admitted {
				t.Fatalf("admit: %+v %v", res, err)
			}
			syncs := sqlitewriter.AckSyncs() - before
			if !power && syncs != 0 {
				t.Fatalf("durability process made %d fsyncs", syncs)
			}
			// Each exchange is its own batch here (one caller at a time),
			// plus the admission's journal line.
			if power && syncs < n+1 {
				t.Fatalf("durability power made %d fsyncs for %d acknowledged batches", syncs, n+1)
			}
		})
	}
}
