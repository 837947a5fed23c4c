package postgres

import (
	"testing"

	"github.com/agentryhq/agentry/dev/vectortest"
)

// go test -run '^$' -bench . -benchtime 200x ./internal/vector/postgres
// (docs/benchmarks.md, "Embeddings and vector search"; the Go fallback:
// this machine's PostgreSQL has no pgvector).
func BenchmarkSearch10k(b *testing.B)  { vectortest.BenchSearch(b, open(b, Options{}), 10_000) }
func BenchmarkSearch100k(b *testing.B) { vectortest.BenchSearch(b, open(b, Options{}), 100_000) }
