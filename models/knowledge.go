package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Knowledge bases (docs/knowledge.md): one row per document of a base,
// written before its KnowledgeIngest workflow starts and updated by the
// workflow's activities; the last step of every workflow records the final
// state (ready or failed), and a reconciliation with Temporal fails a row
// whose workflow ended without it. The chunks and vectors live in the
// vector store; the extracted text waits in knowledge_texts between the
// extract step and the publish step (so neither text nor vectors travel
// through workflow history).

// Knowledge document statuses.
const (
	KnowledgeQueued   = "queued"
	KnowledgeIndexing = "indexing"
	KnowledgeReady    = "ready"
	KnowledgeFailed   = "failed"
)

// KnowledgeDocument is one document of a knowledge base.
type KnowledgeDocument struct {
	// ID is stable for (base, source): a hash of both.
	ID   string `gorm:"primaryKey;size:64" json:"id"`
	Base string `gorm:"size:64;index;not null" json:"base"`
	// Source is the file path or URL.
	Source string `gorm:"size:2048;not null" json:"source"`
	// Root is the source folder a file from a folder or glob must stay
	// inside ("" for a file named directly and for URLs).
	Root   string `gorm:"size:2048" json:"-"`
	Status string `gorm:"size:16;index" json:"status"`
	// WaitingFor is "budget" while an indexing document waits for a hard
	// budget to allow its next embedding batch.
	WaitingFor string `gorm:"size:16" json:"waiting_for,omitempty"`
	// Error is why the document failed.
	Error string `json:"error,omitempty"`
	// Version is the content hash of the published chunks ("" before the
	// first publish); Staging the version being indexed.
	Version string `gorm:"size:80" json:"version,omitempty"`
	Staging string `gorm:"size:80" json:"-"`
	Chunks  int    `json:"chunks"`
	// Embedded is how many chunks of the version being indexed are stored.
	Embedded int    `json:"embedded"`
	Bytes    int64  `json:"bytes"`
	Kind     string `gorm:"size:16" json:"kind,omitempty"`
	// WorkflowID is the KnowledgeIngest workflow that indexes it now or
	// did last.
	WorkflowID string    `gorm:"size:191" json:"workflow_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// IndexedAt is when the document was last ready.
	IndexedAt *time.Time `json:"indexed_at,omitempty"`
}

// TableName implements gorm's Tabler.
func (KnowledgeDocument) TableName() string { return "knowledge_documents" }

// Final reports whether the status is ready or failed.
func (d *KnowledgeDocument) Final() bool {
	return d.Status == KnowledgeReady || d.Status == KnowledgeFailed
}

// KnowledgeText is a document's extracted text for one version, kept
// between extraction and publish.
type KnowledgeText struct {
	Document string `gorm:"primaryKey;size:64"`
	Version  string `gorm:"primaryKey;size:80"`
	Text     string
}

// TableName implements gorm's Tabler.
func (KnowledgeText) TableName() string { return "knowledge_texts" }

// KnowledgeSource is a source added through the API (POST
// /knowledge/bases/{id}/sources), beside those of config.yaml.
type KnowledgeSource struct {
	Base      string    `gorm:"primaryKey;size:64" json:"base"`
	Source    string    `gorm:"primaryKey;size:768" json:"source"`
	CreatedAt time.Time `json:"created_at"`
}

// TableName implements gorm's Tabler.
func (KnowledgeSource) TableName() string { return "knowledge_sources" }

// KnowledgeStore is the knowledge tables (knowledge.go).
type KnowledgeStore interface {
	UpsertKnowledgeDocument(ctx context.Context, d *KnowledgeDocument) error
	GetKnowledgeDocument(ctx context.Context, id string) (*KnowledgeDocument, error)
	ListKnowledgeDocuments(ctx context.Context, base string) ([]KnowledgeDocument, error)
	UpdateKnowledgeDocument(ctx context.Context, id string, fn func(*KnowledgeDocument) error) (*KnowledgeDocument, error)
	DeleteKnowledgeDocument(ctx context.Context, id string) error
	PutKnowledgeText(ctx context.Context, t *KnowledgeText) error
	GetKnowledgeText(ctx context.Context, document, version string) (*KnowledgeText, error)
	DeleteKnowledgeTexts(ctx context.Context, document string) error
	AddKnowledgeSource(ctx context.Context, base, source string) error
	ListKnowledgeSources(ctx context.Context, base string) ([]string, error)
}

var _ KnowledgeStore = (*Store)(nil)

// UpsertKnowledgeDocument inserts d or replaces the row of its id.
func (s *Store) UpsertKnowledgeDocument(ctx context.Context, d *KnowledgeDocument) error {
	now := time.Now().UTC()
	if d.CreatedAt.IsZero() {
		d.CreatedAt = now
	}
	d.UpdatedAt = now
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, UpdateAll: true}).Create(d).Error
	if err != nil {
		return fmt.Errorf("write knowledge document %s: %w", d.ID, err)
	}
	return nil
}

// GetKnowledgeDocument reads a document (ErrNotFound).
func (s *Store) GetKnowledgeDocument(ctx context.Context, id string) (*KnowledgeDocument, error) {
	var d KnowledgeDocument
	err := s.DB.WithContext(ctx).First(&d, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read knowledge document %s: %w", id, err)
	}
	return &d, nil
}

// ListKnowledgeDocuments lists a base's documents by source ("" : every
// base's).
func (s *Store) ListKnowledgeDocuments(ctx context.Context, base string) ([]KnowledgeDocument, error) {
	var out []KnowledgeDocument
	q := s.DB.WithContext(ctx).Order("base, source")
	if base != "" {
		q = q.Where("base = ?", base)
	}
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list knowledge documents: %w", err)
	}
	return out, nil
}

// UpdateKnowledgeDocument changes a document in one transaction: fn gets
// the current row and may change it; the row is saved when fn returns nil.
func (s *Store) UpdateKnowledgeDocument(ctx context.Context, id string, fn func(*KnowledgeDocument) error) (*KnowledgeDocument, error) {
	var out *KnowledgeDocument
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var d KnowledgeDocument
		if err := tx.First(&d, "id = ?", id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return ErrNotFound
			}
			return err
		}
		if err := fn(&d); err != nil {
			return err
		}
		d.UpdatedAt = time.Now().UTC()
		if err := tx.Save(&d).Error; err != nil {
			return err
		}
		out = &d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update knowledge document %s: %w", id, err)
	}
	return out, nil
}

// DeleteKnowledgeDocument removes a document's row.
func (s *Store) DeleteKnowledgeDocument(ctx context.Context, id string) error {
	if err := s.DB.WithContext(ctx).Where("id = ?", id).Delete(&KnowledgeDocument{}).Error; err != nil {
		return fmt.Errorf("delete knowledge document %s: %w", id, err)
	}
	return nil
}

// PutKnowledgeText stores a version's text (again: replaced).
func (s *Store) PutKnowledgeText(ctx context.Context, t *KnowledgeText) error {
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "document"}, {Name: "version"}},
		DoUpdates: clause.AssignmentColumns([]string{"text"})}).Create(t).Error
	if err != nil {
		return fmt.Errorf("write knowledge text of %s: %w", t.Document, err)
	}
	return nil
}

// GetKnowledgeText reads a version's text (ErrNotFound).
func (s *Store) GetKnowledgeText(ctx context.Context, document, version string) (*KnowledgeText, error) {
	var t KnowledgeText
	err := s.DB.WithContext(ctx).First(&t, "document = ? AND version = ?", document, version).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read knowledge text of %s: %w", document, err)
	}
	return &t, nil
}

// DeleteKnowledgeTexts drops every stored text of a document.
func (s *Store) DeleteKnowledgeTexts(ctx context.Context, document string) error {
	if err := s.DB.WithContext(ctx).Where("document = ?", document).Delete(&KnowledgeText{}).Error; err != nil {
		return fmt.Errorf("delete knowledge texts of %s: %w", document, err)
	}
	return nil
}

// AddKnowledgeSource records a source of a base (again: nothing).
func (s *Store) AddKnowledgeSource(ctx context.Context, base, source string) error {
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&KnowledgeSource{Base: base, Source: source, CreatedAt: time.Now().UTC()}).Error
	if err != nil {
		return fmt.Errorf("add knowledge source: %w", err)
	}
	return nil
}

// ListKnowledgeSources are the sources added to a base, oldest first.
func (s *Store) ListKnowledgeSources(ctx context.Context, base string) ([]string, error) {
	var rows []KnowledgeSource
	if err := s.DB.WithContext(ctx).Where("base = ?", base).Order("created_at, source").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list knowledge sources: %w", err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Source
	}
	return out, nil
}
