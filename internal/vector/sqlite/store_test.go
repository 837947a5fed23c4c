package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentryhq/agentry/dev/vectortest"
	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/models"
)

func openDB(t testing.TB, path string) *models.Store {
	t.Helper()
	st, err := models.Open(context.Background(), models.Options{Driver: models.DriverSQLite, DSN: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func open(t testing.TB) *Store {
	t.Helper()
	s, err := New(context.Background(), openDB(t, filepath.Join(t.TempDir(), "agentry.db")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	vectortest.Run(t, func(t *testing.T) vector.Store { return open(t) })
}

// TestReopenKeepsTheFullTextIndex: a second Open (AutoMigrate again, the
// migration already recorded) leaves the triggers in place, so chunks
// staged after a restart are found by their text.
func TestReopenKeepsTheFullTextIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentry.db")
	st := openDB(t, path)
	s, err := New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stage(ctx, "kb", "a", "v", []vector.Chunk{{Position: 0, Text: "before restart"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, "kb", "a", "v"); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	s, err = New(ctx, openDB(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stage(ctx, "kb", "b", "v", []vector.Chunk{{Position: 0, Text: "after restart"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, "kb", "b", "v"); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, vector.Query{Bases: []string{"kb"}, Text: "restart", K: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 {
		t.Fatalf("hits after reopening = %+v, want both documents", hits)
	}
}

func TestTwoProcessesSeeEachOthersChanges(t *testing.T) {
	st := openDB(t, filepath.Join(t.TempDir(), "agentry.db"))
	a, err := New(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	vectortest.Coherence(t, a, b)
}

// The suite passes with no cache and with one too small for any base (the
// search reads the embeddings from the database then).
func TestWithoutCache(t *testing.T) {
	for _, size := range []int64{-1, 100} {
		vectortest.Run(t, func(t *testing.T) vector.Store {
			s, err := New(context.Background(), openDB(t, filepath.Join(t.TempDir(), "agentry.db")), Options{CacheBytes: size})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	}
}

// The full-text side looks up the best matches first; when another base
// crowds them, it searches every match, so a base's only match is found.
func TestFullTextCrowdedByAnotherBase(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	var big []vector.Chunk
	for i := range 300 {
		big = append(big, vector.Chunk{Position: i, Text: "needle needle needle"})
	}
	if err := s.Stage(ctx, "big", "doc", "v", big); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, "big", "doc", "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Stage(ctx, "small", "doc", "v", []vector.Chunk{{Position: 0, Text: "a needle among many other words of a long passage"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, "small", "doc", "v"); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, vector.Query{Bases: []string{"small"}, Text: "needle", K: 1})
	if err != nil || len(hits) != 1 || hits[0].Base != "small" {
		t.Fatalf("hits = %+v, %v; want the small base's chunk", hits, err)
	}
}

func TestRecallWithTheFakeEmbeddings(t *testing.T) { vectortest.Recall(t, open(t)) }
