package vector

import (
	"context"
	"database/sql"
	"fmt"
)

// SQLSearch is the hybrid search of a backend on a SQL database (sqlite,
// postgres): the full-text side and the vector side ranked separately, each
// keeping Candidates(q.K) ids, merged by Fuse, and the merged ids read back
// as hits in the merged order. A backend supplies its queries in its own
// dialect; the steps around them are here, once.
type SQLSearch struct {
	// Text ranks the full-text side: the n best published chunks of
	// q.Bases holding any of terms (Terms of q.Text, never empty), best
	// first.
	Text func(ctx context.Context, q Query, terms []string, n int) ([]Scored, error)
	// Vector, when set, ranks the vector side in the database (pgvector);
	// nil ranks it in Go by cosine over the bases' embeddings, kept in
	// Cache while the bases' generations stay, read with Generations and
	// Embeddings. It is not called for a query without a usable vector.
	Vector func(ctx context.Context, q Query, n int) ([]Scored, error)
	Cache  *Cache
	// Generations queries the (base, generation) rows of bases.
	Generations func(ctx context.Context, bases []string) (*sql.Rows, error)
	// Embeddings queries the (id, vec) rows of base's published chunks of
	// dim dimensions (vec as EncodeVector wrote it).
	Embeddings func(ctx context.Context, base string, dim int) (*sql.Rows, error)
	// Chunks queries the (id, base, document, position, text) rows of ids.
	Chunks func(ctx context.Context, ids []int64) (*sql.Rows, error)
}

// Search runs q (Store.Search).
func (s SQLSearch) Search(ctx context.Context, q Query) ([]Hit, error) {
	q = q.Normalize()
	if len(q.Bases) == 0 {
		return []Hit{}, nil
	}
	n := Candidates(q.K)
	var text, vec []Scored
	var err error
	if terms := Terms(q.Text); len(terms) > 0 {
		if text, err = s.Text(ctx, q, terms, n); err != nil {
			return nil, fmt.Errorf("vector store: full-text search: %w", err)
		}
	}
	if norm := Norm(q.Vector); len(q.Vector) > 0 && norm > 0 {
		if s.Vector != nil {
			vec, err = s.Vector(ctx, q, n)
		} else {
			vec, err = s.rankCached(ctx, q, norm, n)
		}
		if err != nil {
			return nil, fmt.Errorf("vector store: vector search: %w", err)
		}
	}
	hits, err := s.load(ctx, Fuse(text, vec, q.K))
	if err != nil {
		return nil, fmt.Errorf("vector store: read hits: %w", err)
	}
	return hits, nil
}

// rankCached ranks the bases' published embeddings by cosine similarity to
// the query vector, from the cache while it holds the bases' current
// generations, and keeps the n best.
func (s SQLSearch) rankCached(ctx context.Context, q Query, norm float64, n int) ([]Scored, error) {
	gens, err := s.generations(ctx, q.Bases)
	if err != nil {
		return nil, err
	}
	top := NewTopN(n)
	for _, base := range q.Bases {
		err := s.Cache.Rank(base, gens[base], q.Vector, norm, top, func(add func(int64, []float32)) error {
			rows, err := s.Embeddings(ctx, base, len(q.Vector))
			if err != nil {
				return err
			}
			defer rows.Close()
			var id int64
			var raw sql.RawBytes
			var buf []float32
			for rows.Next() {
				if err := rows.Scan(&id, &raw); err != nil {
					return err
				}
				buf = DecodeVector(raw, buf)
				add(id, buf)
			}
			return rows.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return top.Sorted(), nil
}

// generations are the bases' generations (0 for a base never written).
func (s SQLSearch) generations(ctx context.Context, bases []string) (map[string]int64, error) {
	rows, err := s.Generations(ctx, bases)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]int64, len(bases))
	for rows.Next() {
		var b string
		var g int64
		if err := rows.Scan(&b, &g); err != nil {
			return nil, err
		}
		out[b] = g
	}
	return out, rows.Err()
}

// load reads the fused candidates' chunks, in the fused order; a chunk
// deleted since the ranking is left out.
func (s SQLSearch) load(ctx context.Context, fused []Fused) ([]Hit, error) {
	hits := make([]Hit, 0, len(fused))
	if len(fused) == 0 {
		return hits, nil
	}
	ids := make([]int64, len(fused))
	for i, f := range fused {
		ids[i] = f.ID
	}
	rows, err := s.Chunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	chunks := make(map[int64]Chunk, len(fused))
	for rows.Next() {
		var id int64
		var c Chunk
		if err := rows.Scan(&id, &c.Base, &c.Document, &c.Position, &c.Text); err != nil {
			return nil, err
		}
		chunks[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, f := range fused {
		if c, ok := chunks[f.ID]; ok {
			hits = append(hits, Hit{Chunk: c, Score: f.Score, TextScore: f.TextScore, VectorScore: f.VectorScore})
		}
	}
	return hits, nil
}

// ScanScored reads (id, score) rows.
func ScanScored(rows *sql.Rows) ([]Scored, error) {
	defer rows.Close()
	var out []Scored
	for rows.Next() {
		var sc Scored
		if err := rows.Scan(&sc.ID, &sc.Score); err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}
