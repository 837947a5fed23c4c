package apiclient

import (
	"context"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// MemoryEntryList is GET /memory/entries.
type MemoryEntryList struct {
	Raw
	openapi.MemoryEntryList
}

// MemoryEntry is GET /memory/entries/{id}.
type MemoryEntry struct {
	Raw
	openapi.MemoryEntry
}

// MemoryQuery selects memories: an agent, and optionally a subject, one end
// user ("" with User set: the subject's own) and a kind.
type MemoryQuery struct {
	AgentID string
	Subject *string
	User    *string
	Kind    string
	Limit   int
}

// MemoryEntries lists memories of an agent (GET /memory/entries).
func (c *Client) MemoryEntries(ctx context.Context, q MemoryQuery) (*MemoryEntryList, error) {
	p := openapi.GetMemoryEntriesParams{AgentID: q.AgentID, Subject: q.Subject, UserID: q.User}
	if q.Kind != "" {
		k := openapi.GetMemoryEntriesParamsKind(q.Kind)
		p.Kind = &k
	}
	if q.Limit > 0 {
		n := int64(q.Limit)
		p.Limit = &n
	}
	var l MemoryEntryList
	resp, err := c.api.GetMemoryEntries(ctx, &p)
	return &l, c.read(ctx, "GET /memory/entries", resp, err, &l)
}

// MemoryEntryByID reads one memory (GET /memory/entries/{id}).
func (c *Client) MemoryEntryByID(ctx context.Context, id int64) (*MemoryEntry, error) {
	var e MemoryEntry
	resp, err := c.api.GetMemoryEntriesID(ctx, id)
	return &e, c.read(ctx, "GET /memory/entries/{id}", resp, err, &e)
}

// DeleteMemoryEntry forgets one memory (DELETE /memory/entries/{id}).
func (c *Client) DeleteMemoryEntry(ctx context.Context, id int64) error {
	resp, err := c.api.DeleteMemoryEntriesID(ctx, id)
	return c.read(ctx, "DELETE /memory/entries/{id}", resp, err, nil)
}
