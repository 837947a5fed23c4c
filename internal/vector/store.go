// Package vector stores chunks of text with their embeddings and finds them
// again by hybrid search (full text plus vector similarity, merged). One
// interface, one folder per backend: the embedded default on the gateway's
// SQLite database and PostgreSQL for scale (vector.backend).
//
// This file is the contract between the backends and their consumers
// (knowledge ingestion and retrieval); the implementations live beside it.
package vector

import "context"

// Chunk is one passage of a document.
type Chunk struct {
	Base     string `json:"base"`
	Document string `json:"document"`
	// Position is the chunk's index in its document (0-based), its citation.
	Position int       `json:"position"`
	Text     string    `json:"text"`
	Vector   []float32 `json:"-"`
}

// Hit is a chunk a search found, with its merged score (higher is better)
// and the two scores it was merged from (0 when that side did not find it).
type Hit struct {
	Chunk
	Score       float64 `json:"score"`
	TextScore   float64 `json:"text_score"`
	VectorScore float64 `json:"vector_score"`
}

// Query is one search: Text for the full-text side, Vector (the embedding of
// Text) for the similarity side; either may be empty. Bases limits the
// search (empty: none is searched). K is the number of hits wanted.
type Query struct {
	Bases  []string
	Text   string
	Vector []float32
	K      int
}

// Store is a vector store. Documents are written in versions: chunks are
// staged under a version (invisible to Search), then Publish makes that
// version the document's only visible one in one transaction, so a changed
// document replaces its chunks atomically and a crashed ingestion resumes
// from what it staged.
type Store interface {
	// Stage stores chunks of version of a document, not yet visible;
	// staging a position again replaces it (idempotent under retries).
	Stage(ctx context.Context, base, document, version string, chunks []Chunk) error
	// StagedPositions are the positions already staged for version.
	StagedPositions(ctx context.Context, base, document, version string) ([]int, error)
	// Publish makes version the document's only visible version, deleting
	// every other version's chunks, atomically.
	Publish(ctx context.Context, base, document, version string) error
	// DeleteDocument removes every version of a document.
	DeleteDocument(ctx context.Context, base, document string) error
	// DeleteBase removes every document of a base.
	DeleteBase(ctx context.Context, base string) error
	// Search returns at most q.K hits, best first.
	Search(ctx context.Context, q Query) ([]Hit, error)
	// Count is the number of visible chunks of a base.
	Count(ctx context.Context, base string) (int, error)
}
