package knowledge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/models"
)

// Passage is one search hit with its citation: the document's source and
// the chunk's position in it.
type Passage struct {
	vector.Hit
	Source string `json:"source"`
}

// SearchResult is a search's passages, best first.
type SearchResult struct {
	Query string `json:"query"`
	// Truncated says the query was cut to MaxQueryChars.
	Truncated bool      `json:"truncated,omitempty"`
	Passages  []Passage `json:"passages"`
	// TextOnly says the similarity side was left out (no embedding model,
	// or cost governance refused the query's embedding).
	TextOnly bool `json:"text_only,omitempty"`
}

// Search finds the k best passages for query in bases (hybrid: the
// vector store merges full-text and similarity scores). An empty query or
// an unknown base is ErrInvalid / ErrBaseNotFound; a query over
// MaxQueryChars is cut to it. meta attributes the query's embedding.
func (s *Service) Search(ctx context.Context, bases []string, query string, k int, meta llm.CallMeta) (*SearchResult, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, fmt.Errorf("%w: query is empty", ErrInvalid)
	}
	for _, b := range bases {
		if !s.Has(b) {
			return nil, fmt.Errorf("%w: %q", ErrBaseNotFound, b)
		}
	}
	if s.Vectors == nil {
		return nil, ErrNotEnabled
	}
	res := &SearchResult{Passages: []Passage{}}
	if utf8.RuneCountInString(query) > MaxQueryChars {
		query, res.Truncated = string([]rune(query)[:MaxQueryChars]), true
	}
	res.Query = query
	if k < 1 {
		k = max(s.Config.TopK, 1)
	}
	k = min(k, 50)
	q := vector.Query{Bases: bases, Text: query, K: k}
	if s.Embedder != nil {
		if meta.Source == "" {
			meta.Source = llm.SourceEmbedding
		}
		vecs, err := s.Embedder.Embed(ctx, []string{query}, meta)
		switch {
		case err == nil && len(vecs) == 1:
			q.Vector = vecs[0]
		case err == nil, errors.Is(err, costs.ErrBudgetExceeded):
			res.TextOnly = true
		default:
			return nil, err
		}
	} else {
		res.TextOnly = true
	}
	hits, err := s.Vectors.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	sources := map[string]string{}
	for _, h := range hits {
		src, ok := sources[h.Document]
		if !ok {
			if d, err := s.Store.GetKnowledgeDocument(ctx, h.Document); err == nil {
				src = d.Source
			} else if !errors.Is(err, models.ErrNotFound) {
				return nil, err
			}
			sources[h.Document] = src
		}
		res.Passages = append(res.Passages, Passage{Hit: h, Source: src})
	}
	return res, nil
}

// ContextBlock is the text added to the model's context before a turn:
// the passages with their citations, or "" when there are none.
func ContextBlock(passages []Passage) string {
	if len(passages) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Passages from the knowledge bases that may help with the user's message (cite them as [source#position]):\n")
	for _, p := range passages {
		fmt.Fprintf(&b, "\n[%s#%d] (base %s, score %.3f)\n%s\n", p.Source, p.Position, p.Base, p.Score, p.Text)
	}
	return b.String()
}

// Passages implements agent.Knowledge: the context block of the top
// knowledge.top_k passages for text (none when top_k is 0).
func (s *Service) Passages(ctx context.Context, bases []string, text string, meta llm.CallMeta) (string, error) {
	if s.Config.TopK == 0 {
		return "", nil
	}
	res, err := s.Search(ctx, s.known(bases), text, s.Config.TopK, meta)
	if err != nil {
		return "", err
	}
	return ContextBlock(res.Passages), nil
}

// SearchText implements agent.Knowledge: the passages of a
// knowledge_search call as text.
func (s *Service) SearchText(ctx context.Context, bases []string, query string) (string, error) {
	res, err := s.Search(ctx, s.known(bases), query, s.Config.TopK, llm.CallMeta{Subject: "knowledge_search", Workspace: s.Workspace, Source: llm.SourceEmbedding, Trigger: "knowledge_search"})
	if err != nil {
		return "", err
	}
	if len(res.Passages) == 0 {
		return "No passage of the knowledge bases matches.", nil
	}
	out := ContextBlock(res.Passages)
	if res.Truncated {
		out = fmt.Sprintf("(query cut to %d characters)\n", MaxQueryChars) + out
	}
	return out, nil
}

// Describe implements agent.Knowledge.
func (s *Service) Describe(bases []string) string {
	var parts []string
	for _, b := range s.known(bases) {
		if d := s.Description(b); d != "" {
			parts = append(parts, b+" ("+d+")")
		} else {
			parts = append(parts, b)
		}
	}
	return strings.Join(parts, "; ")
}

// known keeps the configured bases of bases (a definition checked before a
// base was removed from config.yaml names it still).
func (s *Service) known(bases []string) []string {
	var out []string
	for _, b := range bases {
		if s.Has(b) {
			out = append(out, b)
		}
	}
	return out
}
