package knowledge

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// BenchmarkIngest measures ingestion (extract, chunk, embed with the fast
// in-process fake, stage, publish) on the embedded SQLite store, in
// chunks per second (docs/benchmarks.md, Knowledge).
func BenchmarkIngest(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		s, _, ws := newServiceB(b)
		for i := range 50 {
			writeB(b, filepath.Join(ws, "docs", fmt.Sprintf("d%02d.md", i)), longDoc(fmt.Sprintf("Fact %d.", i))+longDoc("more"))
		}
		_, _ = s.Sync(ctx, "kb")
		docs, _ := s.Store.ListKnowledgeDocuments(ctx, "kb")
		b.StartTimer()
		start := time.Now()
		chunks := 0
		for _, d := range docs {
			prep, err := ingestB(s, d.ID)
			if err != nil {
				b.Fatal(err)
			}
			chunks += prep.Chunks
		}
		b.ReportMetric(float64(chunks)/time.Since(start).Seconds(), "chunks/s")
	}
}

// BenchmarkPassages is the prompt assembly a turn of an agent with a base
// adds: embed the message, hybrid search over 2,000 chunks, format the
// passages.
func BenchmarkPassages(b *testing.B) {
	ctx := context.Background()
	s, _, ws := newServiceB(b)
	for i := range 100 {
		var text strings.Builder
		for p := range 20 {
			fmt.Fprintf(&text, "Document %d paragraph %d tells that the beacon %d blinks %d times before the tide.\n\n", i, p, i*20+p, p)
		}
		writeB(b, filepath.Join(ws, "docs", fmt.Sprintf("d%03d.md", i)), text.String())
	}
	_, _ = s.Sync(ctx, "kb")
	docs, _ := s.Store.ListKnowledgeDocuments(ctx, "kb")
	total := 0
	for _, d := range docs {
		prep, err := ingestB(s, d.ID)
		if err != nil {
			b.Fatal(err)
		}
		total += prep.Chunks
	}
	b.ResetTimer()
	for i := range b.N {
		block, err := s.Passages(ctx, []string{"kb"}, fmt.Sprintf("how often does beacon %d blink?", i%2000), llm.CallMeta{})
		if err != nil || block == "" {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total), "chunks")
}

var _ = models.KnowledgeReady
