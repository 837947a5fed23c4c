package models

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Searches and listings of one scope never return another scope's rows,
// on both backends; a deleted memory is no longer found.
func TestMemoryStoreScopesAndSearch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		s := mustOpen(t, opts)
		a := MemoryScope{Workspace: "/w", AgentID: "x", Subject: "alice", UserID: "u1"}
		scopes := []MemoryScope{a,
			{Workspace: "/w", AgentID: "y", Subject: "alice", UserID: "u1"},
			{Workspace: "/w", AgentID: "x", Subject: "bob", UserID: "u1"},
			{Workspace: "/w", AgentID: "x", Subject: "alice", UserID: "u2"},
			{Workspace: "/other", AgentID: "x", Subject: "alice", UserID: "u1"},
		}
		ids := map[MemoryScope]int64{}
		for _, sc := range scopes {
			e := &MemoryEntry{Workspace: sc.Workspace, AgentID: sc.AgentID, Subject: sc.Subject, UserID: sc.UserID, Kind: MemoryFact,
				Text: "the favourite colour of " + sc.Subject + " is teal"}
			if err := s.AddMemory(ctx, e); err != nil {
				t.Fatal(err)
			}
			ids[sc] = e.ID
		}
		for _, sc := range scopes {
			hits, err := s.SearchMemories(ctx, sc, []string{"colour", "nothing"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 1 || hits[0].ID != ids[sc] || hits[0].Score <= 0 {
				t.Fatalf("scope %+v: want only its own row %d, got %+v", sc, ids[sc], hits)
			}
			list, err := s.ListMemories(ctx, MemoryFilter{Workspace: sc.Workspace, AgentID: sc.AgentID, Subject: sc.Subject, UserID: sc.UserID})
			if err != nil || len(list) != 1 || list[0].ID != ids[sc] {
				t.Fatalf("list %+v: %+v %v", sc, list, err)
			}
		}
		if hits, err := s.SearchMemories(ctx, a, []string{"purple"}, 10); err != nil || len(hits) != 0 {
			t.Fatalf("unrelated term found %+v %v", hits, err)
		}
		// A term that is FTS syntax is a plain word.
		if _, err := s.SearchMemories(ctx, a, []string{`NEAR`, `"`, `*`}, 10); err != nil {
			t.Fatalf("syntax terms: %v", err)
		}
		if err := s.TouchMemories(ctx, []int64{ids[a]}, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteMemory(ctx, ids[a]); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteMemory(ctx, ids[a]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		if _, err := s.GetMemory(ctx, ids[a]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
		if hits, err := s.SearchMemories(ctx, a, []string{"colour"}, 10); err != nil || len(hits) != 0 {
			t.Fatalf("deleted memory still found: %+v %v", hits, err)
		}
		all, err := s.ListMemories(ctx, MemoryFilter{Workspace: "/w", AgentID: "x", AnyUser: true})
		if err != nil || len(all) != 2 {
			t.Fatalf("every subject and user of agent x: %+v %v", all, err)
		}
	})
}
