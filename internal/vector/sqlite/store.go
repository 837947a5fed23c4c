// Package sqlite is the embedded vector store (vector.backend: embedded):
// a layout on the gateway's own SQLite database, no server and no cgo.
//
// Layout (models.VectorChunk, data migration 13): one row per chunk in
// vector_chunks with its embedding as a BLOB of little-endian float32s, and
// an FTS5 index (vector_chunks_fts, external content, kept by triggers) for
// the full-text side. A search ranks the full-text side with FTS5's bm25,
// the vector side by brute-force cosine over the candidate set (the
// published chunks of the bases searched, kept in memory by vector.Cache
// while their base's generation in vector_bases is unchanged), and merges
// the two by reciprocal-rank fusion (vector.Fuse). docs/decisions.md ("Vector store:
// a layout on SQLite, not a library") says why.
//
// Writes go through the pool's connections in short transactions of at
// most stageBatch chunks, never through the group-commit writer of the chat
// path: a staged document of thousands of chunks takes SQLite's write lock
// many times for a few milliseconds instead of once for seconds, so the
// chat path's batches keep committing between them.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/models"
)

// stageBatch bounds the chunks written per transaction (and stageBytes the
// bytes): the write lock is released between transactions.
const (
	stageBatch = 64
	stageBytes = 512 << 10
	// deleteBatch bounds the rows one DeleteBase transaction removes.
	deleteBatch = 1000
)

// Store is the SQLite vector store. Safe for concurrent use.
type Store struct {
	db    *sql.DB
	cache *vector.Cache
}

// Options tune New.
type Options struct {
	// CacheBytes bounds the embeddings kept in memory for the vector side
	// (vector.Cache; 0: vector.DefaultCacheBytes, < 0: none).
	CacheBytes int64
}

var _ vector.Store = (*Store)(nil)

// New opens the vector store on the gateway's SQLite database (migrated by
// models.Open). It checks the full-text index and its triggers, recreating
// them if a table rebuild dropped them.
func New(ctx context.Context, st models.VectorDatabase, opts ...Options) (*Store, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if st == nil || st.DriverName() != models.DriverSQLite {
		return nil, errors.New("vector store (embedded): needs the gateway's SQLite database")
	}
	db, err := st.SQLDB()
	if err != nil {
		return nil, fmt.Errorf("vector store (embedded): %w", err)
	}
	for _, ddl := range models.VectorSQLiteDDL {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return nil, fmt.Errorf("vector store (embedded): full-text index: %w", err)
		}
	}
	return &Store{db: db, cache: vector.NewCache(o.CacheBytes)}, nil
}

const upsertChunk = `INSERT INTO vector_chunks (base, document, version, position, published, text, dim, vec)
VALUES (?, ?, ?, ?, false, ?, ?, ?)
ON CONFLICT (base, document, version, position) DO UPDATE SET text = excluded.text, dim = excluded.dim, vec = excluded.vec`

// Stage implements vector.Store. The chunks are written in transactions of
// at most stageBatch; a failure midway leaves the earlier ones staged
// (invisible, and replaced when staged again).
func (s *Store) Stage(ctx context.Context, base, document, version string, chunks []vector.Chunk) error {
	if err := vector.CheckSlot(base, document, version); err != nil {
		return err
	}
	if err := vector.CheckChunks(chunks); err != nil {
		return err
	}
	for start := 0; start < len(chunks); {
		end, size := start, 0
		for end < len(chunks) && end-start < stageBatch && (end == start || size+len(chunks[end].Text)+4*len(chunks[end].Vector) <= stageBytes) {
			size += len(chunks[end].Text) + 4*len(chunks[end].Vector)
			end++
		}
		if err := s.stageBatch(ctx, base, document, version, chunks[start:end]); err != nil {
			return fmt.Errorf("vector store: stage %s/%s@%s: %w", base, document, version, err)
		}
		start = end
	}
	return nil
}

func (s *Store) stageBatch(ctx context.Context, base, document, version string, chunks []vector.Chunk) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		// Re-staging the published version changes visible chunks.
		var visible bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM vector_chunks WHERE base = ? AND document = ? AND version = ? AND published)`,
			base, document, version).Scan(&visible); err != nil {
			return err
		}
		if visible {
			if _, err := tx.ExecContext(ctx, models.VectorBumpSQL, base); err != nil {
				return err
			}
		}
		st, err := tx.PrepareContext(ctx, upsertChunk)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, c := range chunks {
			if _, err := st.ExecContext(ctx, base, document, version, c.Position, c.Text, len(c.Vector), vector.EncodeVector(c.Vector)); err != nil {
				return err
			}
		}
		return nil
	})
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
	rows, err := s.db.QueryContext(models.SettledRead(ctx),
		`SELECT position FROM vector_chunks WHERE base = ? AND document = ? AND version = ? ORDER BY position`, base, document, version)
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

// Publish implements vector.Store: one transaction deletes the other
// versions' chunks and makes version's visible.
func (s *Store) Publish(ctx context.Context, base, document, version string) error {
	if err := vector.CheckSlot(base, document, version); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM vector_chunks WHERE base = ? AND document = ? AND version <> ?`, base, document, version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE vector_chunks SET published = true WHERE base = ? AND document = ? AND version = ? AND NOT published`, base, document, version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, models.VectorBumpSQL, base)
		return err
	})
	if err != nil {
		return fmt.Errorf("vector store: publish %s/%s@%s: %w", base, document, version, err)
	}
	return nil
}

// DeleteDocument implements vector.Store (one transaction).
func (s *Store) DeleteDocument(ctx context.Context, base, document string) error {
	if err := vector.CheckSlot(base, document, "-"); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM vector_chunks WHERE base = ? AND document = ?`, base, document); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, models.VectorBumpSQL, base)
		return err
	})
	if err != nil {
		return fmt.Errorf("vector store: delete %s/%s: %w", base, document, err)
	}
	return nil
}

// DeleteBase implements vector.Store, deleteBatch rows per transaction (a
// base of 100k chunks does not hold the write lock for seconds); a search
// during the deletion may see part of the base.
func (s *Store) DeleteBase(ctx context.Context, base string) error {
	if err := vector.CheckSlot(base, "-", "-"); err != nil {
		return err
	}
	for {
		var n int64
		err := s.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM vector_chunks WHERE id IN (SELECT id FROM vector_chunks WHERE base = ? LIMIT ?)`, base, deleteBatch)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			_, err = tx.ExecContext(ctx, models.VectorBumpSQL, base)
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
	err := s.db.QueryRowContext(models.SettledRead(ctx), `SELECT COUNT(*) FROM vector_chunks WHERE base = ? AND published`, base).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("vector store: count %s: %w", base, err)
	}
	return n, nil
}

// Search implements vector.Store; see the package comment.
func (s *Store) Search(ctx context.Context, q vector.Query) ([]vector.Hit, error) {
	return vector.SQLSearch{Text: s.textSide, Cache: s.cache, Generations: s.generations, Embeddings: s.embeddings, Chunks: s.chunks}.
		Search(models.SettledRead(ctx), q)
}

// placeholders is "?, ?, ..." for n arguments.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func anys[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// textSide ranks the published chunks of the bases that hold any of the
// query's words by bm25 (negated: higher is better). FTS5 ranks its own
// index first, without reading a row of vector_chunks, and only the best
// textProbe*n matches are looked up for their base and state; when fewer
// than n of those belong to the bases searched (other bases or staged
// versions crowd the top), the search is repeated over every match.
func (s *Store) textSide(ctx context.Context, q vector.Query, terms []string, n int) ([]vector.Scored, error) {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + t + `"` // Terms are letters and digits only
	}
	match := strings.Join(quoted, " OR ")
	probe := textProbe * n
	out, matched, err := s.textRanked(ctx, match, q.Bases, n, probe)
	if err != nil || len(out) >= n || matched < probe {
		return out, err
	}
	out, _, err = s.textRanked(ctx, match, q.Bases, n, -1)
	return out, err
}

// textProbe is how many matches per wanted hit the first pass looks up.
const textProbe = 4

// textRanked is one pass of textSide over the best probe matches (-1: all);
// matched is how many matches the pass looked up.
func (s *Store) textRanked(ctx context.Context, match string, bases []string, n, probe int) (out []vector.Scored, matched int, err error) {
	args := append(anys(bases), match, probe) // in the order of the placeholders
	rows, err := s.db.QueryContext(ctx, `SELECT f.rowid, -f.rank, c.published AND c.base IN (`+placeholders(len(bases))+`) FROM
(SELECT rowid, rank FROM vector_chunks_fts WHERE vector_chunks_fts MATCH ? ORDER BY rank LIMIT ?) f
JOIN vector_chunks c ON c.id = f.rowid ORDER BY f.rank, f.rowid`, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var sc vector.Scored
		var wanted bool
		if err := rows.Scan(&sc.ID, &sc.Score, &wanted); err != nil {
			return nil, 0, err
		}
		matched++
		if wanted && len(out) < n {
			out = append(out, sc)
		}
	}
	return out, matched, rows.Err()
}

// generations queries the bases' (base, generation) rows.
func (s *Store) generations(ctx context.Context, bases []string) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, `SELECT base, generation FROM vector_bases WHERE base IN (`+placeholders(len(bases))+`)`, anys(bases)...)
}

// embeddings queries the (id, vec) rows of a base's published chunks of
// dim dimensions.
func (s *Store) embeddings(ctx context.Context, base string, dim int) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, `SELECT id, vec FROM vector_chunks WHERE published AND dim = ? AND base = ?`, dim, base)
}

// chunks queries the hits' rows.
func (s *Store) chunks(ctx context.Context, ids []int64) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, `SELECT id, base, document, position, text FROM vector_chunks WHERE id IN (`+placeholders(len(ids))+`)`, anys(ids)...)
}
