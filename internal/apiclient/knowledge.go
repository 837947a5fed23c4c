package apiclient

import (
	"context"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// KnowledgeBase is a knowledge base with its status.
type KnowledgeBase struct {
	Raw
	openapi.KnowledgeBase
}

// KnowledgeBaseList is GET /knowledge/bases.
type KnowledgeBaseList struct {
	Raw
	Bases []openapi.KnowledgeBase `json:"bases"`
	Count int                     `json:"count"`
}

// KnowledgeDocumentList is GET /knowledge/bases/{id}/documents.
type KnowledgeDocumentList struct {
	Raw
	Documents []openapi.KnowledgeDocument `json:"documents"`
	Count     int                         `json:"count"`
}

// KnowledgeReindex is POST /knowledge/bases/{id}/reindex.
type KnowledgeReindex struct {
	Raw
	Base    openapi.KnowledgeBase `json:"base"`
	Started int                   `json:"started"`
}

// KnowledgeSearchResult is POST /knowledge/bases/{id}/search.
type KnowledgeSearchResult struct {
	Raw
	openapi.KnowledgeSearchResult
}

// KnowledgeBases lists the knowledge bases.
func (c *Client) KnowledgeBases(ctx context.Context) (*KnowledgeBaseList, error) {
	var l KnowledgeBaseList
	resp, err := c.api.GetKnowledgeBases(ctx)
	return &l, c.read(ctx, "GET /knowledge/bases", resp, err, &l)
}

// KnowledgeBase reads one base.
func (c *Client) KnowledgeBase(ctx context.Context, id string) (*KnowledgeBase, error) {
	var b KnowledgeBase
	resp, err := c.api.GetKnowledgeBasesBaseID(ctx, id)
	return &b, c.read(ctx, "GET /knowledge/bases/{id}", resp, err, &b)
}

// KnowledgeDocuments lists a base's documents.
func (c *Client) KnowledgeDocuments(ctx context.Context, id string) (*KnowledgeDocumentList, error) {
	var l KnowledgeDocumentList
	resp, err := c.api.GetKnowledgeBasesBaseIDDocuments(ctx, id)
	return &l, c.read(ctx, "GET /knowledge/bases/{id}/documents", resp, err, &l)
}

// AddKnowledgeSource adds a source to a base.
func (c *Client) AddKnowledgeSource(ctx context.Context, id, source string) (*KnowledgeBase, error) {
	var b KnowledgeBase
	resp, err := c.api.PostKnowledgeBasesBaseIDSources(ctx, id, openapi.PostKnowledgeBasesBaseIDSourcesJSONRequestBody{Source: source})
	return &b, c.read(ctx, "POST /knowledge/bases/{id}/sources", resp, err, &b)
}

// ReindexKnowledge indexes a base's sources again.
func (c *Client) ReindexKnowledge(ctx context.Context, id string) (*KnowledgeReindex, error) {
	var r KnowledgeReindex
	resp, err := c.api.PostKnowledgeBasesBaseIDReindex(ctx, id)
	return &r, c.read(ctx, "POST /knowledge/bases/{id}/reindex", resp, err, &r)
}

// SearchKnowledge searches a base.
func (c *Client) SearchKnowledge(ctx context.Context, id, query string, k int) (*KnowledgeSearchResult, error) {
	var r KnowledgeSearchResult
	resp, err := c.api.PostKnowledgeBasesBaseIDSearch(ctx, id, openapi.PostKnowledgeBasesBaseIDSearchJSONRequestBody{Query: query, K: int64(k)})
	return &r, c.read(ctx, "POST /knowledge/bases/{id}/search", resp, err, &r)
}
