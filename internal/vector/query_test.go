package vector

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalize(t *testing.T) {
	q := Query{Bases: []string{"a", "", "a", "b"}, Text: strings.Repeat("é", MaxQueryBytes), K: -1}.Normalize()
	if q.K != DefaultK || len(q.Bases) != 2 || len(q.Text) > MaxQueryBytes || !utf8.ValidString(q.Text) {
		t.Fatalf("%d %v %d %v", q.K, q.Bases, len(q.Text), utf8.ValidString(q.Text))
	}
	if (Query{K: MaxK + 1}).Normalize().K != MaxK || (Query{K: 7}).Normalize().K != 7 {
		t.Fatal("K bounds")
	}
	if got := Terms("The cat, the CAT and 42 dogs!"); strings.Join(got, " ") != "the cat and 42 dogs" {
		t.Fatalf("terms %v", got)
	}
	if got := Terms(strings.Repeat("w ", 10) + strings.Repeat("x y z ", 100) + "unique words here"); len(got) > MaxQueryTerms {
		t.Fatalf("%d terms", len(got))
	}
}

// Reciprocal-rank fusion: a candidate both sides rank high beats one side's
// first; one side alone keeps its order; ties go to the smaller id.
func TestFuse(t *testing.T) {
	text := []Scored{{ID: 1, Score: 9}, {ID: 2, Score: 8}, {ID: 3, Score: 7}}
	vec := []Scored{{ID: 4, Score: 0.9}, {ID: 2, Score: 0.8}}
	got := Fuse(text, vec, 10)
	if got[0].ID != 2 || got[0].TextScore != 8 || got[0].VectorScore != 0.8 {
		t.Fatalf("first = %+v, want id 2 found by both", got[0])
	}
	if got[1].ID != 1 || got[2].ID != 4 { // rank 1 on one side each: tie, smaller id first
		t.Fatalf("order %+v", got)
	}
	if len(Fuse(text, vec, 2)) != 2 || len(Fuse(nil, nil, 5)) != 0 {
		t.Fatal("k bound")
	}
	only := Fuse(nil, vec, 5)
	if only[0].ID != 4 || only[1].ID != 2 {
		t.Fatalf("one side: %+v", only)
	}
}

func TestVectorEncodingAndCosine(t *testing.T) {
	v := []float32{1, -2.5, 3e-7, 0}
	back := DecodeVector(EncodeVector(v), nil)
	for i := range v {
		if back[i] != v[i] {
			t.Fatal("round trip")
		}
	}
	if DecodeVector([]byte{1, 2, 3}, nil) != nil {
		t.Fatal("a length not a multiple of 4 decoded")
	}
	if c := Cosine(v, Norm(v), v); c < 0.9999 {
		t.Fatalf("self cosine %v", c)
	}
	if Cosine(v, Norm(v), []float32{1}) != 0 || Cosine(v, Norm(v), make([]float32, 4)) != 0 {
		t.Fatal("mismatched or zero vectors")
	}
}

func TestCacheReloadsOnANewGeneration(t *testing.T) {
	c := NewCache(0)
	loads := 0
	rows := func(vecs map[int64][]float32) Rows {
		return func(add func(int64, []float32)) error {
			loads++
			for id, v := range vecs {
				add(id, v)
			}
			return nil
		}
	}
	q := []float32{1, 0}
	rank := func(gen int64, vecs map[int64][]float32) []Scored {
		top := NewTopN(5)
		if err := c.Rank("kb", gen, q, 1, top, rows(vecs)); err != nil {
			t.Fatal(err)
		}
		return top.Sorted()
	}
	v1 := map[int64][]float32{1: {1, 0}, 2: {0, 1}}
	if got := rank(1, v1); got[0].ID != 1 || loads != 1 {
		t.Fatalf("%+v loads %d", got, loads)
	}
	rank(1, v1)
	if loads != 1 || c.Bytes() == 0 {
		t.Fatalf("same generation loaded again (%d) or not kept (%d bytes)", loads, c.Bytes())
	}
	if got := rank(2, map[int64][]float32{3: {1, 0.1}}); got[0].ID != 3 || len(got) != 1 || loads != 2 {
		t.Fatalf("new generation: %+v loads %d", got, loads)
	}
	tiny := NewCache(10)
	top := NewTopN(5)
	if err := tiny.Rank("kb", 1, q, 1, top, rows(v1)); err != nil || len(top.Sorted()) != 2 || tiny.Bytes() != 0 {
		t.Fatalf("a base larger than the cache: %v %d %d", err, len(top.Sorted()), tiny.Bytes())
	}
}
