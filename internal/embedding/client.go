package embedding

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/textcut"
)

// Defaults of Options.
const (
	// DefaultBatchSize is how many texts one provider call embeds.
	DefaultBatchSize = 64
	// MaxBatchSize is OpenAI's limit of inputs per request.
	MaxBatchSize = 2048
	// DefaultMaxInputBytes cuts each text before it is sent: OpenAI's
	// embedding models take 8191 tokens, which 24 KiB stays under at the
	// cost controller's estimate of 3 bytes per token. Longer texts (a
	// pasted 100 KB query) are embedded from their first 24 KiB, not
	// refused.
	DefaultMaxInputBytes = 24 << 10
)

// Options build a Client. The knowledge configuration
// (knowledge.embedding.provider / model) is wired to them in gateway/.
type Options struct {
	// Provider is the config id of an openai or ollama provider (llm.providers).
	Provider string
	// Model is the embedding model, e.g. text-embedding-3-small, nomic-embed-text.
	Model string
	// BatchSize is how many texts one provider call embeds (0:
	// DefaultBatchSize; at most MaxBatchSize). Embed splits longer lists.
	BatchSize int
	// Dimensions asks models that support it for vectors of that length (0:
	// the model's own).
	Dimensions int
	// MaxInputBytes cuts each text (0: DefaultMaxInputBytes).
	MaxInputBytes int
}

// Caller is what a Client calls through: llm.Router (whose Gate is the cost
// controller).
type Caller interface {
	Do(ctx context.Context, call *llm.Call) (*llm.Response, error)
}

// Client is the Embedder of one provider and model, calling through the
// Router, so every call is admitted, reserved, settled and written to the
// ledger by the cost controller (source "embedding"), the provider's TPM
// limit and the budgets included. Safe for concurrent use.
type Client struct {
	router Caller
	opts   Options
}

var _ Embedder = (*Client)(nil)

// New builds a Client calling through router.
func New(router Caller, opts Options) (*Client, error) {
	if router == nil {
		return nil, errors.New("embedding: a router is required")
	}
	opts.Provider, opts.Model = strings.TrimSpace(opts.Provider), strings.TrimSpace(opts.Model)
	if opts.Model == "" {
		return nil, errors.New("embedding: a model is required")
	}
	switch {
	case opts.BatchSize <= 0:
		opts.BatchSize = DefaultBatchSize
	case opts.BatchSize > MaxBatchSize:
		return nil, fmt.Errorf("embedding: batch size %d is more than %d", opts.BatchSize, MaxBatchSize)
	}
	if opts.Dimensions < 0 {
		return nil, fmt.Errorf("embedding: dimensions %d is negative", opts.Dimensions)
	}
	if opts.MaxInputBytes <= 0 {
		opts.MaxInputBytes = DefaultMaxInputBytes
	}
	return &Client{router: router, opts: opts}, nil
}

// Model implements Embedder.
func (c *Client) Model() string { return c.opts.Model }

// Provider is the provider's config id ("" for the router's default).
func (c *Client) Provider() string { return c.opts.Provider }

// BatchSize is the most texts one provider call embeds.
func (c *Client) BatchSize() int { return c.opts.BatchSize }

// Embed implements Embedder. More texts than BatchSize are embedded in
// several provider calls, each its own ledger row: with a caller's stable
// meta.CallID they are "<id>" for the first and "<id>/<n>" for the n-th
// after it, so a retried call still counts each batch once. An empty text
// (nothing but white space) is refused as invalid input; invalid UTF-8 is
// replaced, and texts are cut to MaxInputBytes.
func (c *Client) Embed(ctx context.Context, texts []string, meta llm.CallMeta) ([][]float32, error) {
	if len(texts) == 0 {
		return [][]float32{}, nil
	}
	inputs := make([]string, len(texts))
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, &fault.Invalid{Field: fmt.Sprintf("texts[%d]", i), Msg: "is empty; there is nothing to embed"}
		}
		if !utf8.ValidString(t) {
			t = strings.ToValidUTF8(t, "\uFFFD")
		}
		inputs[i] = textcut.Prefix(t, c.opts.MaxInputBytes)
	}
	if meta.Source == "" {
		meta.Source = llm.SourceEmbedding
	}
	out := make([][]float32, 0, len(inputs))
	for n, start := 0, 0; start < len(inputs); n, start = n+1, start+c.opts.BatchSize {
		batch := inputs[start:min(start+c.opts.BatchSize, len(inputs))]
		m := meta
		if m.CallID != "" && n > 0 {
			m.CallID = fmt.Sprintf("%s/%d", meta.CallID, n)
		}
		vecs, err := c.call(ctx, batch, m)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (c *Client) call(ctx context.Context, inputs []string, meta llm.CallMeta) ([][]float32, error) {
	call := &llm.Call{
		Provider: c.opts.Provider, Model: c.opts.Model,
		Request: llm.Request{Model: c.opts.Model, Input: inputs, Dimensions: c.opts.Dimensions},
		Meta:    meta,
	}
	resp, err := c.router.Do(ctx, call)
	if err != nil {
		return nil, fmt.Errorf("embed %d texts with %s/%s: %w", len(inputs), call.Provider, c.opts.Model, err)
	}
	if resp == nil || len(resp.Embeddings) != len(inputs) {
		got := 0
		if resp != nil {
			got = len(resp.Embeddings)
		}
		return nil, fmt.Errorf("embed %d texts with %s/%s: the provider answered %d embeddings", len(inputs), call.Provider, c.opts.Model, got)
	}
	return resp.Embeddings, nil
}
