package vectortest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/vector"
)

// BenchDim is the dimension of the benchmarks' vectors: the fake
// provider's (fakellm.DefaultEmbeddingDimensions).
const BenchDim = fakellm.DefaultEmbeddingDimensions

// chunksPerDoc is how many chunks each benchmark document has.
const chunksPerDoc = 100

var vocabulary = func() []string {
	r := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 5000)
	for i := range words {
		n := 3 + r.IntN(7)
		var b strings.Builder
		for range n {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		words[i] = b.String()
	}
	return words
}()

// text is chunk i's text: 60 words of the vocabulary (about 400 bytes), the
// same for the same i.
func text(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	words := make([]string, 60)
	for j := range words {
		words[j] = vocabulary[r.IntN(len(vocabulary))]
	}
	return strings.Join(words, " ")
}

// Corpus is n chunks in documents of chunksPerDoc, with the fake's
// embeddings of their texts.
func Corpus(n int) map[string][]vector.Chunk {
	docs := map[string][]vector.Chunk{}
	for i := range n {
		d := "doc-" + strconv.Itoa(i/chunksPerDoc)
		t := text(i)
		docs[d] = append(docs[d], vector.Chunk{Position: i % chunksPerDoc, Text: t, Vector: fakellm.EmbedText(t, BenchDim)})
	}
	return docs
}

// Load stages and publishes a corpus of n chunks into base, returning the
// chunks per second Stage reached.
func Load(tb testing.TB, s vector.Store, base string, n int) float64 {
	tb.Helper()
	docs := Corpus(n)
	ctx := context.Background()
	start := time.Now()
	for d, cs := range docs {
		if err := s.Stage(ctx, base, d, "v1", cs); err != nil {
			tb.Fatal(err)
		}
	}
	rate := float64(n) / time.Since(start).Seconds()
	for d := range docs {
		if err := s.Publish(ctx, base, d, "v1"); err != nil {
			tb.Fatal(err)
		}
	}
	if got, err := s.Count(ctx, base); err != nil || got != n {
		tb.Fatalf("Count = %d, %v; want %d", got, err, n)
	}
	return rate
}

// BenchSearch loads n chunks once, then times b.N hybrid searches (K 10,
// the query a passage's first 12 words and their embedding) and reports
// their p50 and p99 in milliseconds, the first search's (which reads the
// embeddings into the cache), Stage's chunks/s and the process's resident
// memory with the store open.
func BenchSearch(b *testing.B, s vector.Store, n int) {
	rate := Load(b, s, "bench", n)
	ctx := context.Background()
	queries := make([]vector.Query, 64)
	for i := range queries {
		words := strings.Fields(text(i * 997 % n))[:12]
		q := strings.Join(words, " ")
		queries[i] = vector.Query{Bases: []string{"bench"}, Text: q, Vector: fakellm.EmbedText(q, BenchDim), K: 10}
	}
	// The first search reads the base's embeddings into the cache.
	t0 := time.Now()
	if _, err := s.Search(ctx, queries[0]); err != nil {
		b.Fatal(err)
	}
	cold := time.Since(t0)
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		hits, err := s.Search(ctx, queries[i%len(queries)])
		if err != nil {
			b.Fatal(err)
		}
		if len(hits) == 0 {
			b.Fatal("no hits")
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	pct := func(p float64) float64 {
		return float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(rate, "stage-chunks/s")
	b.ReportMetric(float64(cold.Microseconds())/1000, "first-search-ms")
	b.ReportMetric(RSSMiB(), "rss-MiB")
	runtime.KeepAlive(s) // its cache is part of the RSS
}

// RSSMiB is the process's resident set size (Linux; 0 elsewhere).
func RSSMiB() float64 {
	runtime.GC()
	debug.FreeOSMemory()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
