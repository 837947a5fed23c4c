// Package postgres is the vector store on the gateway's PostgreSQL database
// (vector.backend: postgres), for bases larger than the embedded store
// serves well and for several gateways sharing one database.
//
// Layout (models.VectorChunk, data migration 13): vector_chunks with the
// embedding as a bytea of little-endian float32s (the same bytes as
// SQLite's BLOB), a generated tsvector column (to_tsvector('simple', text))
// with a GIN index for the full-text side, ranked by ts_rank.
//
// The vector side, where the pgvector extension is installed in the
// database (CREATE EXTENSION vector, or available to the connecting role),
// runs in SQL: New adds a vector column, filled on Stage, and a search
// orders the bases' chunks by cosine distance (<=>) there. Where it is not
// (Debian 12 packages no pgvector), the documented fallback: the bases'
// embeddings are ranked by brute-force cosine in Go, as on SQLite, kept in
// memory by vector.Cache while the base's generation (vector_bases,
// incremented by every change of its visible chunks) is unchanged.
// Both sides are merged by reciprocal-rank fusion (vector.Fuse).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/models"
)

// bumpSQL is models.VectorBumpSQL with PostgreSQL's placeholder.
var bumpSQL = strings.Replace(models.VectorBumpSQL, "?", "$1", 1)

const (
	stageBatch  = 256
	deleteBatch = 5000
)

// Store is the PostgreSQL vector store. Safe for concurrent use.
type Store struct {
	db    *sql.DB
	cache *vector.Cache
	// pgvector is set when the extension is installed and vector_chunks
	// has its embedding column.
	pgvector bool
}

var _ vector.Store = (*Store)(nil)

// Options tune New.
type Options struct {
	// DisablePGVector keeps the Go fallback even where pgvector is
	// installed (tests and benchmarks compare the two).
	DisablePGVector bool
	// CacheBytes bounds the embeddings the fallback keeps in memory
	// (vector.Cache; 0: vector.DefaultCacheBytes, < 0: none).
	CacheBytes int64
}

// New opens the vector store on the gateway's PostgreSQL database (migrated
// by models.Open), using pgvector when the database has it.
func New(ctx context.Context, st models.VectorDatabase, opts Options) (*Store, error) {
	if st == nil || st.DriverName() != models.DriverPostgres {
		return nil, errors.New("vector store (postgres): needs the gateway's PostgreSQL database (storage.backend: postgres)")
	}
	db, err := st.SQLDB()
	if err != nil {
		return nil, fmt.Errorf("vector store (postgres): %w", err)
	}
	s := &Store{db: db, cache: vector.NewCache(opts.CacheBytes)}
	if !opts.DisablePGVector {
		if s.pgvector, err = enablePGVector(ctx, db); err != nil {
			return nil, fmt.Errorf("vector store (postgres): pgvector: %w", err)
		}
	}
	return s, nil
}

// PGVector reports whether searches use pgvector.
func (s *Store) PGVector() bool { return s.pgvector }

// enablePGVector uses the extension when it is installed in the database,
// or installs it when the server has it and the role may (CREATE EXTENSION
// fails otherwise: then the fallback is used), and adds the embedding
// column. The column has no fixed dimension (a base's model decides), so
// no ANN index is built: the search is exact, in SQL.
func enablePGVector(ctx context.Context, db *sql.DB) (bool, error) {
	var available bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&available); err != nil {
		return false, err
	}
	if !available {
		return false, nil
	}
	if _, err := db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
		var installed bool
		if qerr := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')`).Scan(&installed); qerr != nil || !installed {
			return false, nil // present on the server, not allowed here: the fallback
		}
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE vector_chunks ADD COLUMN IF NOT EXISTS embedding vector`); err != nil {
		return false, err
	}
	return true, nil
}

// vectorLiteral is pgvector's text form of v: [1,2,3].
func vectorLiteral(v []float32) any {
	if len(v) == 0 {
		return nil
	}
	var b strings.Builder
	b.Grow(10 * len(v))
	b.WriteByte('[')
	for i, f := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
	}
	b.WriteByte(']')
	return b.String()
}

const upsertChunk = `INSERT INTO vector_chunks (base, document, version, position, published, text, dim, vec)
VALUES ($1, $2, $3, $4, false, $5, $6, $7)
ON CONFLICT (base, document, version, position) DO UPDATE SET text = excluded.text, dim = excluded.dim, vec = excluded.vec`

const upsertChunkPGVector = `INSERT INTO vector_chunks (base, document, version, position, published, text, dim, vec, embedding)
VALUES ($1, $2, $3, $4, false, $5, $6, $7, $8::vector)
ON CONFLICT (base, document, version, position) DO UPDATE SET text = excluded.text, dim = excluded.dim, vec = excluded.vec, embedding = excluded.embedding`

// Stage implements vector.Store, stageBatch chunks per transaction.
func (s *Store) Stage(ctx context.Context, base, document, version string, chunks []vector.Chunk) error {
	if err := vector.CheckSlot(base, document, version); err != nil {
		return err
	}
	if err := vector.CheckChunks(chunks); err != nil {
		return err
	}
	for start := 0; start < len(chunks); start += stageBatch {
		batch := chunks[start:min(start+stageBatch, len(chunks))]
		err := s.tx(ctx, func(tx *sql.Tx) error {
			// Re-staging the published version changes visible chunks.
			var visible bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM vector_chunks WHERE base = $1 AND document = $2 AND version = $3 AND published)`,
				base, document, version).Scan(&visible); err != nil {
				return err
			}
			if visible {
				if _, err := tx.ExecContext(ctx, bumpSQL, base); err != nil {
					return err
				}
			}
			q := upsertChunk
			if s.pgvector {
				q = upsertChunkPGVector
			}
			st, err := tx.PrepareContext(ctx, q)
			if err != nil {
				return err
			}
			defer st.Close()
			for _, c := range batch {
				args := []any{base, document, version, c.Position, c.Text, len(c.Vector), vector.EncodeVector(c.Vector)}
				if s.pgvector {
					args = append(args, vectorLiteral(c.Vector))
				}
				if _, err := st.ExecContext(ctx, args...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("vector store: stage %s/%s@%s: %w", base, document, version, err)
		}
	}
	return nil
}

func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// StagedPositions implements vector.Store.
func (s *Store) StagedPositions(ctx context.Context, base, document, version string) ([]int, error) {
	if err := vector.CheckSlot(base, document, version); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT position FROM vector_chunks WHERE base = $1 AND document = $2 AND version = $3 ORDER BY position`, base, document, version)
	if err != nil {
		return nil, fmt.Errorf("vector store: staged positions of %s/%s@%s: %w", base, document, version, err)
	}
	defer rows.Close()
	out := []int{}
	for rows.Next() {
		var p int
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Publish implements vector.Store in one transaction.
func (s *Store) Publish(ctx context.Context, base, document, version string) error {
	if err := vector.CheckSlot(base, document, version); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM vector_chunks WHERE base = $1 AND document = $2 AND version <> $3`, base, document, version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE vector_chunks SET published = true WHERE base = $1 AND document = $2 AND version = $3 AND NOT published`, base, document, version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, bumpSQL, base)
		return err
	})
	if err != nil {
		return fmt.Errorf("vector store: publish %s/%s@%s: %w", base, document, version, err)
	}
	return nil
}

// DeleteDocument implements vector.Store.
func (s *Store) DeleteDocument(ctx context.Context, base, document string) error {
	if err := vector.CheckSlot(base, document, "-"); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM vector_chunks WHERE base = $1 AND document = $2`, base, document); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, bumpSQL, base)
		return err
	})
	if err != nil {
		return fmt.Errorf("vector store: delete %s/%s: %w", base, document, err)
	}
	return nil
}

// DeleteBase implements vector.Store, deleteBatch rows per statement.
func (s *Store) DeleteBase(ctx context.Context, base string) error {
	if err := vector.CheckSlot(base, "-", "-"); err != nil {
		return err
	}
	for {
		var n int64
		err := s.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM vector_chunks WHERE id IN (SELECT id FROM vector_chunks WHERE base = $1 LIMIT $2)`, base, deleteBatch)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			_, err = tx.ExecContext(ctx, bumpSQL, base)
			return err
		})
		if err != nil {
			return fmt.Errorf("vector store: delete base %s: %w", base, err)
		}
		if n < deleteBatch {
			return nil
		}
	}
}

// Count implements vector.Store.
func (s *Store) Count(ctx context.Context, base string) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM vector_chunks WHERE base = $1 AND published`, base).Scan(&n); err != nil {
		return 0, fmt.Errorf("vector store: count %s: %w", base, err)
	}
	return n, nil
}

// Search implements vector.Store; see the package comment.
func (s *Store) Search(ctx context.Context, q vector.Query) ([]vector.Hit, error) {
	search := vector.SQLSearch{Text: s.textSide, Cache: s.cache, Generations: s.generations, Embeddings: s.embeddings, Chunks: s.chunks}
	if s.pgvector {
		search.Vector = s.vectorSideSQL
	}
	return search.Search(ctx, q)
}

// textSide ranks the bases' published chunks holding any of the words by
// ts_rank.
func (s *Store) textSide(ctx context.Context, q vector.Query, terms []string, n int) ([]vector.Scored, error) {
	// Terms are letters and digits only: safe as tsquery operands.
	rows, err := s.db.QueryContext(ctx, `SELECT c.id, ts_rank(c.tsv, tq)::float8 AS r FROM vector_chunks c, to_tsquery('simple', $1) tq
WHERE c.tsv @@ tq AND c.published AND c.base = ANY($2) ORDER BY r DESC, c.id LIMIT $3`, strings.Join(terms, " | "), q.Bases, n)
	if err != nil {
		return nil, err
	}
	return vector.ScanScored(rows)
}

// vectorSideSQL ranks by pgvector's cosine distance in the database.
func (s *Store) vectorSideSQL(ctx context.Context, q vector.Query, n int) ([]vector.Scored, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, (1 - (embedding <=> $1::vector))::float8 FROM vector_chunks
WHERE published AND dim = $2 AND base = ANY($3) AND embedding IS NOT NULL ORDER BY embedding <=> $1::vector, id LIMIT $4`,
		vectorLiteral(q.Vector), len(q.Vector), q.Bases, n)
	if err != nil {
		return nil, err
	}
	return vector.ScanScored(rows)
}

// generations queries the bases' (base, generation) rows (the fallback
// vector side: vector.Cache).
func (s *Store) generations(ctx context.Context, bases []string) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, `SELECT base, generation FROM vector_bases WHERE base = ANY($1)`, bases)
}

// embeddings queries the (id, vec) rows of a base's published chunks of
// dim dimensions (the fallback vector side).
func (s *Store) embeddings(ctx context.Context, base string, dim int) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, `SELECT id, vec FROM vector_chunks WHERE published AND dim = $1 AND base = $2`, dim, base)
}

// chunks queries the hits' rows.
func (s *Store) chunks(ctx context.Context, ids []int64) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, `SELECT id, base, document, position, text FROM vector_chunks WHERE id = ANY($1)`, ids)
}
