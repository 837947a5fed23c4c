package knowledge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// The steps of the KnowledgeIngest workflow (activities/knowledge.go calls
// them). Errors for which IsRefusal is true are not retried.

// Prepare reads and extracts a document, stores the text under its
// version and marks the document indexing; a version already published
// (and stored) is unchanged.
func (s *Service) Prepare(ctx context.Context, id string) (*workflows.KnowledgePrepareResult, error) {
	d, err := s.Store.GetKnowledgeDocument(ctx, id)
	if err != nil {
		return nil, err
	}
	max := int64(s.Config.MaxDocumentBytes)
	var data []byte
	var kind string
	if isURL(d.Source) {
		timeout := s.FetchTimeout
		if timeout <= 0 {
			timeout = time.Minute
		}
		body, ct, err := fetchURL(ctx, s.SSRF, d.Source, max, timeout)
		if err != nil {
			return nil, err
		}
		data, kind = body, KindOf(urlName(d.Source), ct)
	} else {
		kind = KindOf(d.Source, "")
		if kind == "" {
			return nil, refuse("unsupported file type %q (supported: .md, .markdown, .txt, .html, .htm, .pdf)", extOf(d.Source))
		}
		if data, err = readFile(d.Source, d.Root, max); err != nil {
			return nil, err
		}
	}
	if kind == "" {
		return nil, refuse("unsupported content type (supported: markdown, plain text, HTML, PDF)")
	}
	text, err := Extract(kind, data)
	if err != nil {
		return nil, refuse("%v", err)
	}
	version := s.version(text)
	chunks := Chunk(text, s.Config.Chunking.Size, s.Config.Chunking.Overlap)
	res := &workflows.KnowledgePrepareResult{Version: version, Chunks: len(chunks), BatchSize: s.Config.Embedding.BatchSize}
	if d.Version == version && d.Status != models.KnowledgeFailed {
		res.Unchanged = true
		return res, nil
	}
	if len(chunks) == 0 {
		return nil, refuse("the document has no text")
	}
	if err := s.Store.PutKnowledgeText(ctx, &models.KnowledgeText{Document: id, Version: version, Text: text}); err != nil {
		return nil, err
	}
	staged := 0
	if s.Vectors != nil {
		pos, err := s.Vectors.StagedPositions(ctx, d.Base, id, version)
		if err != nil {
			return nil, err
		}
		staged = len(pos)
	}
	_, err = s.Store.UpdateKnowledgeDocument(ctx, id, func(x *models.KnowledgeDocument) error {
		x.Status, x.Error, x.WaitingFor = models.KnowledgeIndexing, "", ""
		x.Staging, x.Kind, x.Bytes, x.Embedded = version, kind, int64(len(data)), staged
		if x.Version == "" {
			x.Chunks = len(chunks)
		}
		return nil
	})
	return res, err
}

func extOf(p string) string {
	for i := len(p) - 1; i >= 0 && p[i] != '/'; i-- {
		if p[i] == '.' {
			return p[i:]
		}
	}
	return "(none)"
}

// EmbedBatch embeds one batch of a version's chunks in one provider call
// and stages them; positions already staged (a retry after a crash) are
// not embedded again. A hard budget that cannot cover the call returns
// the embedder's error (costs.ErrBudgetExceeded), which the activity turns
// into a budget refusal the workflow waits out.
func (s *Service) EmbedBatch(ctx context.Context, in workflows.KnowledgeBatchInput) (int, error) {
	if s.Vectors == nil || s.Embedder == nil {
		return 0, refuse("no embedding model is configured (knowledge.embedding.model)")
	}
	d, err := s.Store.GetKnowledgeDocument(ctx, in.Document)
	if err != nil {
		return 0, err
	}
	t, err := s.Store.GetKnowledgeText(ctx, in.Document, in.Version)
	if err != nil {
		return 0, fmt.Errorf("the text of version %s: %w", in.Version, err)
	}
	chunks := Chunk(t.Text, s.Config.Chunking.Size, s.Config.Chunking.Overlap)
	lo := in.Batch * in.BatchSize
	hi := min(lo+in.BatchSize, len(chunks))
	if lo >= hi {
		return 0, nil
	}
	staged, err := s.Vectors.StagedPositions(ctx, d.Base, in.Document, in.Version)
	if err != nil {
		return 0, err
	}
	have := make(map[int]bool, len(staged))
	for _, p := range staged {
		have[p] = true
	}
	var todo []vector.Chunk
	var texts []string
	for p := lo; p < hi; p++ {
		if !have[p] {
			todo = append(todo, vector.Chunk{Base: d.Base, Document: in.Document, Position: p, Text: chunks[p]})
			texts = append(texts, chunks[p])
		}
	}
	if len(todo) == 0 {
		return 0, nil
	}
	vecs, err := s.Embedder.Embed(ctx, texts, llm.CallMeta{CallID: in.CallID, Subject: "knowledge:" + d.Base, Workspace: s.Workspace, Source: llm.SourceEmbedding, Trigger: "knowledge",
		RunID: workflows.KnowledgeIngestWorkflowID(in.Document)})
	if err != nil {
		return 0, err
	}
	if len(vecs) != len(todo) {
		return 0, fmt.Errorf("the embedder returned %d vectors for %d texts", len(vecs), len(todo))
	}
	for i := range todo {
		todo[i].Vector = vecs[i]
	}
	if err := s.Vectors.Stage(ctx, d.Base, in.Document, in.Version, todo); err != nil {
		return 0, err
	}
	_, err = s.Store.UpdateKnowledgeDocument(ctx, in.Document, func(x *models.KnowledgeDocument) error {
		x.Embedded = min(x.Embedded+len(todo), len(chunks))
		return nil
	})
	return len(todo), err
}

// Publish makes a staged version the document's only visible one and
// records the document ready.
func (s *Service) Publish(ctx context.Context, in workflows.KnowledgeBatchInput) error {
	if s.Vectors == nil {
		return refuse("no vector store")
	}
	d, err := s.Store.GetKnowledgeDocument(ctx, in.Document)
	if err != nil {
		return err
	}
	staged, err := s.Vectors.StagedPositions(ctx, d.Base, in.Document, in.Version)
	if err != nil {
		return err
	}
	if err := s.Vectors.Publish(ctx, d.Base, in.Document, in.Version); err != nil {
		return err
	}
	now := time.Now().UTC()
	if _, err := s.Store.UpdateKnowledgeDocument(ctx, in.Document, func(x *models.KnowledgeDocument) error {
		x.Status, x.Error, x.WaitingFor = models.KnowledgeReady, "", ""
		x.Version, x.Staging, x.Chunks, x.Embedded, x.IndexedAt = in.Version, "", len(staged), len(staged), &now
		return nil
	}); err != nil {
		return err
	}
	return s.Store.DeleteKnowledgeTexts(ctx, in.Document)
}

// Finish records the final state of a document not published: ready
// when unchanged, failed with the reason otherwise (its staged chunks are
// kept for a later attempt of the same version; the published version, if
// any, stays searchable).
func (s *Service) Finish(ctx context.Context, in workflows.KnowledgeFinishInput) error {
	now := time.Now().UTC()
	_, err := s.Store.UpdateKnowledgeDocument(ctx, in.Document, func(x *models.KnowledgeDocument) error {
		x.WaitingFor = ""
		if in.Unchanged {
			x.Status, x.Error, x.IndexedAt = models.KnowledgeReady, "", &now
			x.Embedded = x.Chunks
			return nil
		}
		x.Status, x.Error = models.KnowledgeFailed, in.Error
		return nil
	})
	if errors.Is(err, models.ErrNotFound) {
		return nil // removed meanwhile
	}
	return err
}

// Wait records that a document waits for budget or stopped waiting.
func (s *Service) Wait(ctx context.Context, in workflows.KnowledgeWaitInput) error {
	_, err := s.Store.UpdateKnowledgeDocument(ctx, in.Document, func(x *models.KnowledgeDocument) error {
		x.WaitingFor = in.WaitingFor
		if in.WaitingFor != "" {
			x.Error = in.Reason
		} else {
			x.Error = ""
		}
		return nil
	})
	return err
}
