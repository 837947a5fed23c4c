package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/internal/vector/vectortest"
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
