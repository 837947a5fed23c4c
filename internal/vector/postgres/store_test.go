package postgres

import (
	"context"
	"testing"

	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/dev/vectortest"
	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func openDB(t testing.TB) *models.Store {
	t.Helper()
	dsn := testenv.Postgres(t)
	if dsn == "" {
		t.Skip("PostgreSQL not available")
	}
	st, err := models.Open(context.Background(), models.Options{Driver: models.DriverPostgres, DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func open(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := New(context.Background(), openDB(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance runs the suite with pgvector when the server has it, and
// with the Go fallback always.
func TestConformance(t *testing.T) {
	t.Run("fallback", func(t *testing.T) {
		vectortest.Run(t, func(t *testing.T) vector.Store { return open(t, Options{DisablePGVector: true}) })
	})
	t.Run("pgvector", func(t *testing.T) {
		probe := open(t, Options{})
		if !probe.PGVector() {
			t.Skip("the pgvector extension is not available on this PostgreSQL server (apt-get install postgresql-15-pgvector)")
		}
		vectortest.Run(t, func(t *testing.T) vector.Store { return open(t, Options{}) })
	})
}

func TestNewRefusesSQLite(t *testing.T) {
	if _, err := New(context.Background(), nil, Options{}); err == nil {
		t.Fatal("a nil store was accepted")
	}
}

func TestTwoProcessesSeeEachOthersChanges(t *testing.T) {
	st := openDB(t)
	a, err := New(context.Background(), st, Options{DisablePGVector: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), st, Options{DisablePGVector: true})
	if err != nil {
		t.Fatal(err)
	}
	vectortest.Coherence(t, a, b)
}

func TestRecallWithTheFakeEmbeddings(t *testing.T) {
	vectortest.Recall(t, open(t, Options{DisablePGVector: true}))
}
