package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/models"
)

// The figures of docs/benchmarks.md, "Memory":
//
//	go test ./internal/memory -run '^$' -bench . -benchtime 2000x
//
// BenchmarkSearch10k*: memory_search in a scope of 10,000 memories (another
// 10,000 in other scopes of the same agent), p50 and p99 of one search.
// BenchmarkPinned10k: what hot memory adds to the prompt assembly of one
// turn in such a scope (the facts read, fitted and formatted).

var words = []string{"teal", "deadline", "friday", "invoice", "berlin", "coffee", "python", "garden", "meeting", "budget",
	"report", "launch", "cat", "piano", "holiday", "dentist", "server", "backup", "train", "birthday"}

func seed(b *testing.B, s *Service, n int) {
	b.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2 * n {
		sc := ana
		if i%2 == 1 {
			sc = agent.MemoryScope{AgentID: ana.AgentID, Subject: "other", UserID: fmt.Sprint(i % 50)}
		}
		text := fmt.Sprintf("memory %d: the %s of topic%d is on topic%d near topic%d", i, words[r.IntN(len(words))],
			r.IntN(topics), r.IntN(topics), r.IntN(topics))
		e := &models.MemoryEntry{Workspace: s.Workspace, AgentID: sc.AgentID, Subject: sc.Subject, UserID: sc.UserID,
			Kind: models.MemoryFact, Text: text, CreatedAt: time.Unix(int64(i), 0).UTC()}
		if i%3 == 0 {
			e.Kind = models.MemoryArchive
		}
		if err := s.Store.AddMemory(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

// topics is the vocabulary of the selective words: each of them is in
// about 2*10,000*3/5,000 = 12 memories, as a person's or a project's name
// would be; the 20 common words are each in a twentieth of all memories.
const topics = 5000

func percentiles(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkSearch10k: a query of two selective words.
func BenchmarkSearch10k(b *testing.B) {
	benchSearch(b, func(r *rand.Rand) string { return fmt.Sprintf("topic%d and topic%d", r.IntN(topics), r.IntN(topics)) })
}

// BenchmarkSearch10kBroad: the worst case, two common words (each in 5% of
// all memories).
func BenchmarkSearch10kBroad(b *testing.B) {
	benchSearch(b, func(r *rand.Rand) string { return words[r.IntN(len(words))] + " " + words[r.IntN(len(words))] })
}

func benchSearch(b *testing.B, query func(r *rand.Rand) string) {
	s := newService(b, 2000)
	s.Now = nil
	seed(b, s, 10_000)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		q := query(r)
		start := time.Now()
		if _, err := s.Search(ctx, ana, q, DefaultSearchLimit); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	percentiles(b, took)
}

func BenchmarkPinned10k(b *testing.B) {
	s := newService(b, 2000)
	s.Now = nil
	seed(b, s, 10_000)
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		p, err := s.Pinned(ctx, memDef, ana)
		if err != nil || p == "" {
			b.Fatal(p, err)
		}
		took = append(took, time.Since(start))
	}
	percentiles(b, took)
}
