package vector

import (
	"container/heap"
	"encoding/binary"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds every backend applies to a Query (Normalize), so bad input costs a
// bounded amount of work and never fails.
const (
	// DefaultK is the number of hits of a query with K <= 0.
	DefaultK = 10
	// MaxK is the most hits one search returns; a larger K is cut to it.
	MaxK = 100
	// MaxQueryBytes is how much of Query.Text the full-text side reads: a
	// longer text (a pasted 100 KB document) is cut there, on a character
	// boundary, not refused.
	MaxQueryBytes = 2048
	// MaxQueryTerms is how many distinct words of the text the full-text
	// side looks for (the first ones).
	MaxQueryTerms = 32
	// RRFK is the constant of reciprocal-rank fusion (see Fuse).
	RRFK = 60
)

// Normalize applies the bounds: K into [1, MaxK] (DefaultK when <= 0), the
// text cut to MaxQueryBytes, the bases deduplicated and without empty ids.
func (q Query) Normalize() Query {
	switch {
	case q.K <= 0:
		q.K = DefaultK
	case q.K > MaxK:
		q.K = MaxK
	}
	if len(q.Text) > MaxQueryBytes {
		cut := MaxQueryBytes
		for cut > 0 && !utf8.RuneStart(q.Text[cut]) {
			cut--
		}
		q.Text = q.Text[:cut]
	}
	bases := make([]string, 0, len(q.Bases))
	for _, b := range q.Bases {
		if b != "" && !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
	}
	q.Bases = bases
	return q
}

// Candidates is how many hits each side of a hybrid search contributes to
// the fusion for k wanted hits.
func Candidates(k int) int { return min(max(4*k, 50), 4*MaxK) }

// Terms are the distinct words of text (letters and digits, lower-cased),
// at most MaxQueryTerms, in order of first appearance: what the full-text
// side of every backend searches for (any of them, ranked by BM25 or
// ts_rank). Text without a word gives none, and the full-text side is then
// skipped.
func Terms(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if !slices.Contains(out, w) {
			out = append(out, w)
			if len(out) == MaxQueryTerms {
				break
			}
		}
	}
	return out
}

// EncodeVector is the stored form of a vector: little-endian float32s.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// DecodeVector reads EncodeVector's form into dst (reused when large
// enough); a length not a multiple of 4 gives nil.
func DecodeVector(b []byte, dst []float32) []float32 {
	if len(b)%4 != 0 {
		return nil
	}
	n := len(b) / 4
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return dst
}

// Norm is the Euclidean norm of v.
func Norm(v []float32) float64 {
	var s float64
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	return math.Sqrt(s)
}

// Cosine is the cosine similarity of a and b given the norm of a; 0 when the
// dimensions differ or either is zero.
func Cosine(a []float32, normA float64, b []float32) float64 {
	if len(a) != len(b) || normA == 0 {
		return 0
	}
	var dot, nb float32
	for i, x := range a {
		y := b[i]
		dot += x * y
		nb += y * y
	}
	if nb == 0 {
		return 0
	}
	return float64(dot) / (normA * math.Sqrt(float64(nb)))
}

// Scored is one candidate of one side of a search: a backend's row id and
// its score on that side (higher is better).
type Scored struct {
	ID    int64
	Score float64
}

// TopN keeps the n best of the scores it is given (a min-heap); ties keep the
// smaller id, so results are deterministic.
type TopN struct {
	n int
	h scoredHeap
}

// NewTopN keeps the n best.
func NewTopN(n int) *TopN { return &TopN{n: n, h: make(scoredHeap, 0, n)} }

// Push offers one candidate.
func (t *TopN) Push(id int64, score float64) {
	if t.n <= 0 {
		return
	}
	if len(t.h) < t.n {
		heap.Push(&t.h, Scored{ID: id, Score: score})
		return
	}
	if worse(t.h[0], Scored{ID: id, Score: score}) {
		t.h[0] = Scored{ID: id, Score: score}
		heap.Fix(&t.h, 0)
	}
}

// Sorted returns the kept candidates, best first.
func (t *TopN) Sorted() []Scored {
	out := slices.Clone(t.h)
	sort.Slice(out, func(i, j int) bool { return worse(out[j], out[i]) })
	return out
}

// worse reports whether a ranks below b.
func worse(a, b Scored) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.ID > b.ID
}

type scoredHeap []Scored

func (h scoredHeap) Len() int           { return len(h) }
func (h scoredHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h scoredHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *scoredHeap) Push(x any)        { *h = append(*h, x.(Scored)) }
func (h *scoredHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Fused is one merged candidate: its id, the fused score and the two side
// scores (0 for a side that did not find it).
type Fused struct {
	ID                           int64
	Score, TextScore, VectorScore float64
}

// Fuse merges the two ranked sides by reciprocal-rank fusion: each
// candidate scores the sum over the sides that found it of 1/(RRFK+rank),
// rank counted from 1 in that side's order. Rank fusion needs no
// calibration between BM25 (unbounded) and cosine (-1..1) scores, which
// differ per backend (bm25 on SQLite, ts_rank on PostgreSQL), so every
// backend ranks alike. A search with one side only keeps that side's
// order. The k best are returned, best first (ties: smaller id first).
func Fuse(text, vec []Scored, k int) []Fused {
	byID := map[int64]*Fused{}
	var order []*Fused
	get := func(id int64) *Fused {
		f, ok := byID[id]
		if !ok {
			f = &Fused{ID: id}
			byID[id] = f
			order = append(order, f)
		}
		return f
	}
	for i, s := range text {
		f := get(s.ID)
		f.TextScore = s.Score
		f.Score += 1 / float64(RRFK+i+1)
	}
	for i, s := range vec {
		f := get(s.ID)
		f.VectorScore = s.Score
		f.Score += 1 / float64(RRFK+i+1)
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].Score != order[j].Score {
			return order[i].Score > order[j].Score
		}
		return order[i].ID < order[j].ID
	})
	if len(order) > k {
		order = order[:k]
	}
	out := make([]Fused, len(order))
	for i, f := range order {
		out[i] = *f
	}
	return out
}
