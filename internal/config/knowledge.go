package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// KnowledgeConfig is knowledge bases (retrieval-augmented answers,
// docs/knowledge.md). The chunks and their vectors live in the vector
// store (vector.backend) on the application database, so there is no
// separate knowledge database path: one backup, one transaction for a
// document's chunks and its status.
type KnowledgeConfig struct {
	// Embedding is the model that embeds chunks and queries (through the
	// cost controller, source "embedding").
	Embedding KnowledgeEmbeddingConfig `yaml:"embedding" env:", prefix=EMBEDDING_"`
	// Chunking is how documents are cut into passages.
	Chunking KnowledgeChunkingConfig `yaml:"chunking" env:", prefix=CHUNKING_"`
	// TopK is how many passages are added to the model's context before a
	// turn of an agent that names bases (0: none are added; the
	// knowledge_search tool still works).
	TopK int `yaml:"top_k" env:"TOP_K"`
	// MaxDocumentBytes is the largest document read; a larger file or
	// download is failed without being read into memory.
	MaxDocumentBytes int `yaml:"max_document_bytes" env:"MAX_DOCUMENT_BYTES"`
	// Bases are the knowledge bases by id.
	Bases map[string]KnowledgeBaseConfig `yaml:"bases,omitempty"`
	Extra map[string]any                 `yaml:",inline"`
}

// KnowledgeEmbeddingConfig names the embedding provider and model.
type KnowledgeEmbeddingConfig struct {
	// Provider is an id of llm.providers (its type says the protocol:
	// openai /v1/embeddings, ollama /api/embed); empty: llm.default_provider.
	Provider string `yaml:"provider,omitempty" env:"PROVIDER"`
	// Model is the embedding model (e.g. text-embedding-3-small,
	// nomic-embed-text).
	Model string `yaml:"model,omitempty" env:"MODEL"`
	// BatchSize is how many chunks one embedding call (one activity) takes.
	BatchSize int `yaml:"batch_size" env:"BATCH_SIZE"`
}

// KnowledgeChunkingConfig is the chunk size and the overlap between
// neighbouring chunks, in characters.
type KnowledgeChunkingConfig struct {
	Size    int `yaml:"size" env:"SIZE"`
	Overlap int `yaml:"overlap" env:"OVERLAP"`
}

// KnowledgeBaseConfig is one knowledge base.
type KnowledgeBaseConfig struct {
	// Description tells people (and the model, in the knowledge_search
	// tool) what the base holds.
	Description string `yaml:"description,omitempty"`
	// Sources are files, folders (every supported file below them), globs
	// (relative paths are relative to the workspace) and http(s) URLs
	// (fetched through runtime.ssrf).
	Sources []string `yaml:"sources,omitempty"`
}

// Knowledge defaults (docs/configuration.md).
const (
	DefaultChunkSize        = 1000
	DefaultChunkOverlap     = 150
	DefaultEmbeddingBatch   = 64
	DefaultKnowledgeTopK    = 4
	DefaultMaxDocumentBytes = 20 << 20
	// MaxEmbeddingBatch bounds knowledge.embedding.batch_size (one call's
	// inputs; providers cap theirs near 2048).
	MaxEmbeddingBatch = 2048
)

// KnowledgeDefaults are the defaults of the knowledge section.
func KnowledgeDefaults() KnowledgeConfig {
	return KnowledgeConfig{
		Embedding:        KnowledgeEmbeddingConfig{BatchSize: DefaultEmbeddingBatch},
		Chunking:         KnowledgeChunkingConfig{Size: DefaultChunkSize, Overlap: DefaultChunkOverlap},
		TopK:             DefaultKnowledgeTopK,
		MaxDocumentBytes: DefaultMaxDocumentBytes,
	}
}

// KnowledgeBaseID is the spelling of a base id (it appears in paths and
// agent definitions).
var KnowledgeBaseID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

func validateKnowledge(k *KnowledgeConfig, bad func(key, format string, args ...any)) {
	if k.Chunking.Size < 100 || k.Chunking.Size > 100000 {
		bad("knowledge.chunking.size", "%d is out of range (100-100000 characters)", k.Chunking.Size)
	}
	if k.Chunking.Overlap < 0 || k.Chunking.Overlap >= k.Chunking.Size/2 {
		bad("knowledge.chunking.overlap", "%d must be at least 0 and less than half of knowledge.chunking.size", k.Chunking.Overlap)
	}
	if k.Embedding.BatchSize < 1 || k.Embedding.BatchSize > MaxEmbeddingBatch {
		bad("knowledge.embedding.batch_size", "%d is out of range (1-%d)", k.Embedding.BatchSize, MaxEmbeddingBatch)
	}
	if k.TopK < 0 || k.TopK > 50 {
		bad("knowledge.top_k", "%d is out of range (0-50)", k.TopK)
	}
	if k.MaxDocumentBytes < 1 {
		bad("knowledge.max_document_bytes", "must be positive")
	}
	ids := make([]string, 0, len(k.Bases))
	for id := range k.Bases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		b := k.Bases[id]
		if !KnowledgeBaseID.MatchString(id) {
			bad("knowledge.bases."+id, "base id must be lower-case letters, digits, - and _ (at most 63)")
		}
		for i, src := range b.Sources {
			key := fmt.Sprintf("knowledge.bases.%s.sources[%d]", id, i)
			switch {
			case strings.TrimSpace(src) == "":
				bad(key, "empty source")
			case strings.Contains(src, "://") && !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://"):
				bad(key, "%q: only files, folders, globs and http(s) URLs are sources", src)
			}
		}
	}
}
