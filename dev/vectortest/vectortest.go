// Package vectortest is the conformance suite every vector.Store backend
// passes (internal/vector/sqlite, internal/vector/postgres): staging and
// publishing atomically, re-staging, searches across bases, deletion, the
// bounds of K and empty query sides.
package vectortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/vector"
)

// Open returns a fresh, empty store for one test.
type Open func(t *testing.T) vector.Store

// dim is the dimension of the suite's vectors.
const dim = 8

// axis is the unit vector along axis i (mod dim), tilted slightly towards
// the next axis by tilt, so vectors can be ranked.
func axis(i int, tilt float32) []float32 {
	v := make([]float32, dim)
	v[i%dim] = 1
	v[(i+1)%dim] = tilt
	return v
}

func chunk(pos int, text string, vec []float32) vector.Chunk {
	return vector.Chunk{Position: pos, Text: text, Vector: vec}
}

// Run runs the suite against the stores open makes.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s vector.Store)
	}{
		{"StagedIsInvisibleUntilPublished", stagedInvisible},
		{"PublishReplacesTheVersion", publishReplaces},
		{"RestageReplacesAPosition", restageReplaces},
		{"SearchAcrossBases", acrossBases},
		{"DeleteDocumentAndBase", deletion},
		{"KBounds", kBounds},
		{"EmptyQuerySides", emptySides},
		{"HybridRanking", hybrid},
		{"BadInput", badInput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func search(t *testing.T, s vector.Store, q vector.Query) []vector.Hit {
	t.Helper()
	hits, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	if hits == nil {
		t.Fatalf("search %+v: nil hits, want a (possibly empty) slice", q)
	}
	return hits
}

func texts(hits []vector.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Text
	}
	return out
}

func count(t *testing.T, s vector.Store, base string) int {
	t.Helper()
	n, err := s.Count(context.Background(), base)
	must(t, err)
	return n
}

func stagedInvisible(t *testing.T, s vector.Store) {
	ctx := context.Background()
	must(t, s.Stage(ctx, "kb", "doc.md", "v1", []vector.Chunk{
		chunk(0, "the walrus sleeps on ice", axis(0, 0)),
		chunk(1, "penguins swim fast", axis(1, 0)),
		chunk(2, "otters hold hands", axis(2, 0)),
	}))
	if hits := search(t, s, vector.Query{Bases: []string{"kb"}, Text: "walrus", Vector: axis(0, 0), K: 5}); len(hits) != 0 {
		t.Fatalf("staged chunks found before Publish: %v", texts(hits))
	}
	if n := count(t, s, "kb"); n != 0 {
		t.Fatalf("Count before Publish = %d, want 0", n)
	}
	pos, err := s.StagedPositions(ctx, "kb", "doc.md", "v1")
	must(t, err)
	if !slices.Equal(pos, []int{0, 1, 2}) {
		t.Fatalf("StagedPositions = %v, want [0 1 2]", pos)
	}
	must(t, s.Publish(ctx, "kb", "doc.md", "v1"))
	must(t, s.Publish(ctx, "kb", "doc.md", "v1")) // idempotent
	if n := count(t, s, "kb"); n != 3 {
		t.Fatalf("Count after Publish = %d, want 3", n)
	}
	hits := search(t, s, vector.Query{Bases: []string{"kb"}, Text: "walrus", K: 5})
	if len(hits) != 1 || hits[0].Text != "the walrus sleeps on ice" || hits[0].Document != "doc.md" || hits[0].Position != 0 || hits[0].Base != "kb" {
		t.Fatalf("hits = %+v, want the walrus chunk with its citation", hits)
	}
	if hits[0].TextScore <= 0 || hits[0].VectorScore != 0 || hits[0].Score <= 0 {
		t.Fatalf("scores of a text-only hit = %+v", hits[0])
	}
}

func publishReplaces(t *testing.T, s vector.Store) {
	ctx := context.Background()
	must(t, s.Stage(ctx, "kb", "doc", "v1", []vector.Chunk{chunk(0, "old alpha text", axis(0, 0)), chunk(1, "old beta text", axis(1, 0))}))
	must(t, s.Publish(ctx, "kb", "doc", "v1"))
	must(t, s.Stage(ctx, "kb", "doc", "v2", []vector.Chunk{chunk(0, "new gamma text", axis(2, 0))}))
	// v2 staged: v1 still the one visible.
	if got := texts(search(t, s, vector.Query{Bases: []string{"kb"}, Text: "text", K: 10})); !sameSet(got, []string{"old alpha text", "old beta text"}) {
		t.Fatalf("before publishing v2: %v", got)
	}
	must(t, s.Publish(ctx, "kb", "doc", "v2"))
	if got := texts(search(t, s, vector.Query{Bases: []string{"kb"}, Text: "text", Vector: axis(0, 0), K: 10})); !slices.Equal(got, []string{"new gamma text"}) {
		t.Fatalf("after publishing v2: %v, want only the new chunk", got)
	}
	if n := count(t, s, "kb"); n != 1 {
		t.Fatalf("Count = %d, want 1", n)
	}
	pos, err := s.StagedPositions(ctx, "kb", "doc", "v1")
	must(t, err)
	if len(pos) != 0 {
		t.Fatalf("v1 positions after v2 was published = %v, want none", pos)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func restageReplaces(t *testing.T, s vector.Store) {
	ctx := context.Background()
	must(t, s.Stage(ctx, "kb", "doc", "v1", []vector.Chunk{chunk(0, "first draft about zebras", axis(0, 0))}))
	must(t, s.Stage(ctx, "kb", "doc", "v1", []vector.Chunk{chunk(0, "second draft about giraffes", axis(3, 0)), chunk(1, "more giraffes", axis(4, 0))}))
	pos, err := s.StagedPositions(ctx, "kb", "doc", "v1")
	must(t, err)
	if !slices.Equal(pos, []int{0, 1}) {
		t.Fatalf("StagedPositions = %v, want [0 1]", pos)
	}
	must(t, s.Publish(ctx, "kb", "doc", "v1"))
	if hits := search(t, s, vector.Query{Bases: []string{"kb"}, Text: "zebras", K: 5}); len(hits) != 0 {
		t.Fatalf("the replaced text is still found: %v", texts(hits))
	}
	hits := search(t, s, vector.Query{Bases: []string{"kb"}, Vector: axis(3, 0), K: 1})
	if len(hits) != 1 || hits[0].Text != "second draft about giraffes" {
		t.Fatalf("vector search = %v, want the replacing chunk", texts(hits))
	}
	if hits[0].VectorScore < 0.99 {
		t.Fatalf("cosine of an identical vector = %v", hits[0].VectorScore)
	}
}

func acrossBases(t *testing.T, s vector.Store) {
	ctx := context.Background()
	for i, b := range []string{"a", "b", "c"} {
		must(t, s.Stage(ctx, b, "doc", "v", []vector.Chunk{chunk(0, "shared word in base "+b, axis(i, 0))}))
		must(t, s.Publish(ctx, b, "doc", "v"))
	}
	q := func(bases ...string) []string {
		return texts(search(t, s, vector.Query{Bases: bases, Text: "shared word", Vector: axis(0, 0.1), K: 10}))
	}
	if got := q("a", "b"); !sameSet(got, []string{"shared word in base a", "shared word in base b"}) {
		t.Fatalf("bases a,b: %v", got)
	}
	if got := q("c"); !slices.Equal(got, []string{"shared word in base c"}) {
		t.Fatalf("base c: %v", got)
	}
	if got := q(); len(got) != 0 {
		t.Fatalf("no bases: %v, want nothing searched", got)
	}
	if got := q("nope"); len(got) != 0 {
		t.Fatalf("unknown base: %v", got)
	}
	if got := q("a", "a", ""); !slices.Equal(got, []string{"shared word in base a"}) {
		t.Fatalf("duplicate and empty base ids: %v", got)
	}
}

func deletion(t *testing.T, s vector.Store) {
	ctx := context.Background()
	for _, d := range []string{"d1", "d2"} {
		must(t, s.Stage(ctx, "kb", d, "v", []vector.Chunk{chunk(0, "lemur "+d, axis(0, 0)), chunk(1, "lemur two "+d, axis(1, 0))}))
		must(t, s.Publish(ctx, "kb", d, "v"))
	}
	must(t, s.Stage(ctx, "other", "d1", "v", []vector.Chunk{chunk(0, "lemur elsewhere", axis(0, 0))}))
	must(t, s.Publish(ctx, "other", "d1", "v"))
	must(t, s.Stage(ctx, "kb", "d1", "v2", []vector.Chunk{chunk(0, "staged lemur", axis(0, 0))}))

	must(t, s.DeleteDocument(ctx, "kb", "d1"))
	if n := count(t, s, "kb"); n != 2 {
		t.Fatalf("Count after deleting d1 = %d, want 2", n)
	}
	pos, err := s.StagedPositions(ctx, "kb", "d1", "v2")
	must(t, err)
	if len(pos) != 0 {
		t.Fatalf("a staged version survived DeleteDocument: %v", pos)
	}
	for _, h := range search(t, s, vector.Query{Bases: []string{"kb", "other"}, Text: "lemur", Vector: axis(0, 0), K: 10}) {
		if h.Base == "kb" && h.Document == "d1" {
			t.Fatalf("deleted document found: %+v", h)
		}
	}
	must(t, s.DeleteBase(ctx, "kb"))
	if n := count(t, s, "kb"); n != 0 {
		t.Fatalf("Count after DeleteBase = %d", n)
	}
	if n := count(t, s, "other"); n != 1 {
		t.Fatalf("DeleteBase touched another base: Count(other) = %d", n)
	}
	must(t, s.DeleteBase(ctx, "kb"))           // nothing left: fine
	must(t, s.DeleteDocument(ctx, "kb", "d9")) // unknown: fine
}

func kBounds(t *testing.T, s vector.Store) {
	ctx := context.Background()
	var cs []vector.Chunk
	for i := range 150 {
		cs = append(cs, chunk(i, fmt.Sprintf("common token number %d", i), axis(i, float32(i%7)/10)))
	}
	must(t, s.Stage(ctx, "kb", "big", "v", cs))
	must(t, s.Publish(ctx, "kb", "big", "v"))
	for _, tc := range []struct{ k, want int }{{0, vector.DefaultK}, {-5, vector.DefaultK}, {3, 3}, {1 << 30, vector.MaxK}} {
		for _, q := range []vector.Query{
			{Bases: []string{"kb"}, Text: "common token", K: tc.k},
			{Bases: []string{"kb"}, Vector: axis(0, 0), K: tc.k},
			{Bases: []string{"kb"}, Text: "common", Vector: axis(0, 0), K: tc.k},
		} {
			if got := len(search(t, s, q)); got != tc.want {
				t.Fatalf("K=%d (text %q, vector %v): %d hits, want %d", tc.k, q.Text, q.Vector != nil, got, tc.want)
			}
		}
	}
	hits := search(t, s, vector.Query{Bases: []string{"kb"}, Vector: axis(5, 0), K: 20})
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Fatalf("hits not best first at %d: %v > %v", i, hits[i].Score, hits[i-1].Score)
		}
	}
	if hits[0].VectorScore < 0.99 {
		t.Fatalf("best vector hit has cosine %v, want the identical vector first", hits[0].VectorScore)
	}
}

func emptySides(t *testing.T, s vector.Store) {
	ctx := context.Background()
	must(t, s.Stage(ctx, "kb", "doc", "v", []vector.Chunk{chunk(0, "capybara facts", axis(0, 0)), chunk(1, "no vector here", nil)}))
	must(t, s.Publish(ctx, "kb", "doc", "v"))
	if hits := search(t, s, vector.Query{Bases: []string{"kb"}, K: 5}); len(hits) != 0 {
		t.Fatalf("a query with neither side found %v", texts(hits))
	}
	if hits := search(t, s, vector.Query{Bases: []string{"kb"}, Text: "  !!! ... ", K: 5}); len(hits) != 0 {
		t.Fatalf("a text without words found %v", texts(hits))
	}
	if hits := search(t, s, vector.Query{Bases: []string{"kb"}, Vector: make([]float32, dim), K: 5}); len(hits) != 0 {
		t.Fatalf("a zero vector found %v", texts(hits))
	}
	if hits := search(t, s, vector.Query{Bases: []string{"kb"}, Vector: []float32{1, 0, 0}, K: 5}); len(hits) != 0 {
		t.Fatalf("a vector of another dimension found %v", texts(hits))
	}
	if got := texts(search(t, s, vector.Query{Bases: []string{"kb"}, Text: "vector", K: 5})); !slices.Equal(got, []string{"no vector here"}) {
		t.Fatalf("text side alone: %v (a chunk without a vector is still found by its text)", got)
	}
	hits := search(t, s, vector.Query{Bases: []string{"kb"}, Vector: axis(0, 0), K: 5})
	if got := texts(hits); !slices.Equal(got, []string{"capybara facts"}) {
		t.Fatalf("vector side alone: %v", got)
	}
	if hits[0].TextScore != 0 || hits[0].VectorScore <= 0 {
		t.Fatalf("scores of a vector-only hit: %+v", hits[0])
	}
}

func hybrid(t *testing.T, s vector.Store) {
	ctx := context.Background()
	must(t, s.Stage(ctx, "kb", "doc", "v", []vector.Chunk{
		chunk(0, "the lighthouse keeper logs the storm", axis(4, 0)),
		chunk(1, "the lighthouse keeper", axis(0, 0.9)),
		chunk(2, "unrelated gardening notes", axis(0, 0)),
	}))
	must(t, s.Publish(ctx, "kb", "doc", "v"))
	hits := search(t, s, vector.Query{Bases: []string{"kb"}, Text: "lighthouse keeper", Vector: axis(0, 0.8), K: 3})
	if len(hits) != 3 || hits[0].Position != 1 {
		t.Fatalf("hybrid order = %v, want the chunk both sides found first", texts(hits))
	}
	if hits[0].TextScore <= 0 || hits[0].VectorScore <= 0 {
		t.Fatalf("the chunk found by both sides lacks a side's score: %+v", hits[0])
	}
}

func badInput(t *testing.T, s vector.Store) {
	ctx := context.Background()
	must(t, s.Stage(ctx, "kb", "doc", "v", []vector.Chunk{chunk(0, "quokka smiles", axis(0, 0))}))
	must(t, s.Publish(ctx, "kb", "doc", "v"))
	huge := "quokka " + strings.Repeat("x", 100<<10) + " é"
	if hits := search(t, s, vector.Query{Bases: []string{"kb"}, Text: huge, K: 5}); len(hits) != 1 {
		t.Fatalf("a 100 KB query (truncated) found %v, want the quokka", texts(hits))
	}
	words := strings.Repeat("word ", 20000) + "quokka"
	search(t, s, vector.Query{Bases: []string{"kb"}, Text: words, K: 5}) // many words: bounded, no error
	search(t, s, vector.Query{Bases: []string{"kb"}, Text: `"quokka" OR NEAR(a b) * ^ - :`, K: 5})

	invalid := func(what string, err error) {
		t.Helper()
		var inv *fault.Invalid
		if !errors.As(err, &inv) {
			t.Fatalf("%s: err = %v, want *fault.Invalid", what, err)
		}
	}
	invalid("empty base", s.Stage(ctx, "", "doc", "v", nil))
	invalid("empty document", s.Stage(ctx, "kb", "", "v", nil))
	invalid("empty version", s.Publish(ctx, "kb", "doc", ""))
	invalid("negative position", s.Stage(ctx, "kb", "doc", "v2", []vector.Chunk{chunk(-1, "x", nil)}))
	invalid("duplicate position", s.Stage(ctx, "kb", "doc", "v2", []vector.Chunk{chunk(1, "x", nil), chunk(1, "y", nil)}))
	invalid("invalid UTF-8", s.Stage(ctx, "kb", "doc", "v2", []vector.Chunk{chunk(0, "\xff\xfe", nil)}))
	invalid("long base", s.DeleteBase(ctx, strings.Repeat("b", vector.MaxBaseBytes+1)))
	if n := count(t, s, "kb"); n != 1 {
		t.Fatalf("refused input changed the store: Count = %d", n)
	}
	pos, err := s.StagedPositions(ctx, "kb", "doc", "v2")
	must(t, err)
	if len(pos) != 0 {
		t.Fatalf("refused chunks were staged: %v", pos)
	}
}

// Coherence checks two stores on one database (two gateway processes, each
// with its own embedding cache): what one publishes or deletes, the
// other's vector searches see at once.
func Coherence(t *testing.T, a, b vector.Store) {
	ctx := context.Background()
	q := vector.Query{Bases: []string{"kb"}, Vector: axis(0, 0), K: 5}
	must(t, a.Stage(ctx, "kb", "doc", "v1", []vector.Chunk{chunk(0, "first", axis(0, 0))}))
	must(t, a.Publish(ctx, "kb", "doc", "v1"))
	if got := texts(search(t, b, q)); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("b after a published v1: %v", got)
	}
	must(t, b.Stage(ctx, "kb", "doc", "v2", []vector.Chunk{chunk(0, "second", axis(0, 0.1))}))
	must(t, b.Publish(ctx, "kb", "doc", "v2"))
	if got := texts(search(t, a, q)); !slices.Equal(got, []string{"second"}) {
		t.Fatalf("a after b published v2: %v (a stale cache)", got)
	}
	must(t, a.Stage(ctx, "kb", "doc", "v2", []vector.Chunk{chunk(0, "second, restaged", axis(3, 0))}))
	if got := search(t, b, q); len(got) != 1 || got[0].VectorScore > 0.5 {
		t.Fatalf("b after a re-staged the published version with another vector: %+v", got)
	}
	must(t, b.DeleteDocument(ctx, "kb", "doc"))
	if got := texts(search(t, a, q)); len(got) != 0 {
		t.Fatalf("a after b deleted the document: %v", got)
	}
	must(t, a.Stage(ctx, "kb", "doc2", "v1", []vector.Chunk{chunk(0, "third", axis(0, 0))}))
	must(t, a.Publish(ctx, "kb", "doc2", "v1"))
	search(t, b, q)
	must(t, a.DeleteBase(ctx, "kb"))
	if got := texts(search(t, b, q)); len(got) != 0 {
		t.Fatalf("b after a deleted the base: %v", got)
	}
}

// Recall checks that the fake provider's embeddings make retrieval
// testable: 200 documents, each holding one fact (a made-up code name for
// an invented city), are stored with fakellm.EmbedText vectors; a question
// worded otherwise than the fact must find the fact's chunk in the top 5,
// by the hybrid search (and mostly by the vector side alone). The vectors
// have the fake's default 256 dimensions. It returns the hybrid recall@5.
func Recall(t *testing.T, s vector.Store) float64 {
	ctx := context.Background()
	const n = 200
	city := func(i int) string { return fmt.Sprintf("zorvex%dton", i) }
	code := func(i int) string { return fmt.Sprintf("K%04dQ", (i*7919)%10000) }
	for i := range n {
		chunks := []vector.Chunk{
			{Position: 0, Text: fmt.Sprintf("The archive of %s holds the records of its harbour and its markets.", city(i))},
			{Position: 1, Text: fmt.Sprintf("The secret code name of %s is %s, as the council decided.", city(i), code(i))},
			{Position: 2, Text: "Visitors should bring warm clothes; the winters are long and the summers short."},
		}
		for j := range chunks {
			chunks[j].Vector = fakellm.EmbedText(chunks[j].Text, 0)
		}
		doc := fmt.Sprintf("city-%03d.md", i)
		must(t, s.Stage(ctx, "facts", doc, "v1", chunks))
		must(t, s.Publish(ctx, "facts", doc, "v1"))
	}
	found := map[string]int{}
	for i := range n {
		question := fmt.Sprintf("what code name did the council give %s", city(i))
		want := fmt.Sprintf("city-%03d.md", i)
		for side, q := range map[string]vector.Query{
			"vector": {Bases: []string{"facts"}, Vector: fakellm.EmbedText(question, 0), K: 5},
			"hybrid": {Bases: []string{"facts"}, Text: question, Vector: fakellm.EmbedText(question, 0), K: 5},
		} {
			for _, h := range search(t, s, q) {
				if h.Document == want && h.Position == 1 {
					found[side]++
					break
				}
			}
		}
	}
	// The vector side alone loses a few facts to hash collisions of the
	// fake's 256 features (0.925 when written); the hybrid finds them all.
	for side, floor := range map[string]float64{"vector": 0.85, "hybrid": 0.99} {
		if r := float64(found[side]) / n; r < floor {
			t.Errorf("%s recall@5 = %.3f, want >= %.2f", side, r, floor)
		}
	}
	t.Logf("recall@5 over %d facts: vector %.3f, hybrid %.3f", n, float64(found["vector"])/n, float64(found["hybrid"])/n)
	return float64(found["hybrid"]) / n
}
