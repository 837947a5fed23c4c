package sqlite

import (
	"testing"

	"github.com/agentryhq/agentry/dev/vectortest"
)

// go test -run '^$' -bench . -benchtime 200x ./internal/vector/sqlite
// (docs/benchmarks.md, "Embeddings and vector search").
func BenchmarkSearch10k(b *testing.B)  { vectortest.BenchSearch(b, open(b), 10_000) }
func BenchmarkSearch100k(b *testing.B) { vectortest.BenchSearch(b, open(b), 100_000) }
