package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

func openStore(t testing.TB) *models.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := models.Open(ctx, models.Options{DSN: filepath.Join(t.TempDir(), "app.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newService is a service whose clock ticks a second per call, so that
// "most recently used" is well defined.
func newService(t testing.TB, hot int) *Service {
	t.Helper()
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &Service{Store: openStore(t), Workspace: "/ws", HotMemoryChars: hot, Archive: true, Dir: t.TempDir(),
		Now: func() time.Time { tick = tick.Add(time.Second); return tick }}
}

var ana = agent.MemoryScope{AgentID: "a", Subject: "alice", UserID: "ana"}

func call(name string, args any) llm.ToolCall {
	b, _ := json.Marshal(args)
	return llm.ToolCall{ID: "c", Name: name, Arguments: b}
}

var memDef = &agentdef.Definition{ID: "a", Memory: &agentdef.Memory{Enabled: true}}

// Hot memory keeps the most recently used facts that fit the cap; a search
// hit is used again and comes back.
func TestHotMemoryEvictsTheLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 100)
	for i := range 5 {
		if _, err := s.Write(ctx, ana, fmt.Sprintf("fact number %d %s", i, strings.Repeat("x", 20))); err != nil {
			t.Fatal(err)
		}
	}
	hot, err := s.Hot(ctx, ana)
	if err != nil {
		t.Fatal(err)
	}
	// Each fact is 35 characters: two fit in 100, the newest two.
	if len(hot) != 2 || !strings.Contains(hot[0].Text, "number 4") || !strings.Contains(hot[1].Text, "number 3") {
		t.Fatalf("hot %+v", hot)
	}
	if _, err := s.Search(ctx, ana, "number 0 zzz", 1); err != nil {
		t.Fatal(err)
	}
	hot, _ = s.Hot(ctx, ana)
	if len(hot) != 2 || !strings.Contains(hot[0].Text, "number 0") {
		t.Fatalf("a searched fact is not pinned again: %+v", hot)
	}
	pinned, err := s.Pinned(ctx, memDef, ana)
	if err != nil || !strings.Contains(pinned, "- fact number 0") || strings.Contains(pinned, "number 3") {
		t.Fatalf("pinned %q %v", pinned, err)
	}
	// Other scopes have none of it.
	for _, other := range []agent.MemoryScope{{AgentID: "b", Subject: "alice", UserID: "ana"}, {AgentID: "a", Subject: "bob", UserID: "ana"}, {AgentID: "a", Subject: "alice"}} {
		if p, err := s.Pinned(ctx, memDef, other); err != nil || p != "" {
			t.Fatalf("%+v pinned %q %v", other, p, err)
		}
		if hits, err := s.Search(ctx, other, "fact", 5); err != nil || len(hits) != 0 {
			t.Fatalf("%+v search %+v %v", other, hits, err)
		}
	}
}

func TestWriteAndSearchBadInput(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 100)
	var long *TooLongError
	if _, err := s.Write(ctx, ana, strings.Repeat("é", 101)); !errors.As(err, &long) || long.Chars != 101 || long.Max != 100 {
		t.Fatalf("over the cap: %v", err)
	}
	if _, err := s.Write(ctx, ana, " \n "); !errors.Is(err, ErrEmptyText) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := s.Search(ctx, ana, " ?! ", 5); !errors.Is(err, ErrEmptyQuery) {
		t.Fatalf("empty query: %v", err)
	}
	if _, err := s.Write(ctx, ana, "the word needle is here"); err != nil {
		t.Fatal(err)
	}
	// 100 KB: cut to MaxQueryChars, searched without error.
	huge := "needle " + strings.Repeat("haystack ", 100<<10/9)
	hits, err := s.Search(ctx, ana, huge, 5)
	if err != nil || len(hits) != 1 {
		t.Fatalf("huge query: %+v %v", hits, err)
	}
	// Its first 1,000 characters: needle, haystack and the cut end of one.
	if terms := Terms(huge); len(terms) != 3 || terms[0] != "needle" || terms[1] != "haystack" {
		t.Fatalf("terms of the huge query: %v", terms)
	}
	if got := Terms(strings.Repeat("a", 2000)); len(got) != 1 || len(got[0]) != maxTermChars {
		t.Fatalf("long word: %v", got)
	}
	if got := len(Terms(strings.Repeat("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20 w21 w22 w23 w24 w25 w26 w27 w28 w29 w30 w31 w32 w33 w34 ", 2))); got != MaxQueryTerms {
		t.Fatalf("terms cap: %d", got)
	}
	// Through the tools: errors the model sees, not failures.
	for _, c := range []llm.ToolCall{call("memory_write", map[string]string{"text": strings.Repeat("x", 101)}),
		call("memory_write", map[string]string{}), call("memory_search", map[string]string{"query": ""}),
		{Name: "memory_search", Arguments: json.RawMessage(`{"query": 5}`)}} {
		res, err := s.Call(ctx, ana, c)
		if err != nil || !res.IsError {
			t.Fatalf("%s %s: %+v %v", c.Name, c.Arguments, res, err)
		}
	}
}

// File memory is confined to the scope's folder: no escapes, no symlinks
// out, markdown only, and another scope's notes are not readable.
func TestFileMemoryConfined(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 100)
	res, err := s.Call(ctx, ana, call("memory_write_file", map[string]string{"path": "prefs/colours.md", "content": "teal"}))
	if err != nil || res.IsError {
		t.Fatalf("write: %+v %v", res, err)
	}
	res, _ = s.Call(ctx, ana, call("memory_read_file", map[string]string{"path": "prefs/colours.md"}))
	if res.Content != "teal" {
		t.Fatalf("read: %+v", res)
	}
	res, _ = s.Call(ctx, ana, call("memory_read_file", map[string]string{}))
	if res.Content != "prefs/colours.md" {
		t.Fatalf("list: %+v", res)
	}
	bob := agent.MemoryScope{AgentID: "a", Subject: "bob", UserID: "ana"}
	if res, _ := s.Call(ctx, bob, call("memory_read_file", map[string]string{"path": "prefs/colours.md"})); !res.IsError {
		t.Fatalf("bob read ana's note: %+v", res)
	}
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.md"), []byte("secret"), 0o600)
	if err := os.Symlink(outside, filepath.Join(s.NotesDir(ana), "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []llm.ToolCall{
		call("memory_read_file", map[string]string{"path": "../../../etc/passwd.md"}),
		call("memory_read_file", map[string]string{"path": "/etc/x.md"}),
		call("memory_read_file", map[string]string{"path": "link/secret.md"}),
		call("memory_write_file", map[string]string{"path": "link/new.md", "content": "x"}),
		call("memory_write_file", map[string]string{"path": "notes.txt", "content": "x"}),
		call("memory_write_file", map[string]string{"path": "big.md", "content": strings.Repeat("x", MaxNoteBytes+1)}),
	} {
		res, err := s.Call(ctx, ana, c)
		if err != nil || !res.IsError {
			t.Fatalf("%s %s: %+v %v", c.Name, c.Arguments, res, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new.md")); err == nil {
		t.Fatal("a write went through the symlink")
	}
}
