package llm

import (
	"context"
	"fmt"
	"sort"

	"github.com/agentryhq/agentry/internal/fault"
)

// Embedding calls go through the same Router, gate and retry wrapper as chat
// calls: a Request with Input set is an embedding request, which the Router
// hands to the provider's Embed instead of Chat (spec, cost rule 1:
// embedding inference passes the one admission and accounting controller).
// The clients speak OpenAI's POST {base}/embeddings and Ollama's POST
// {base}/api/embed with the chat clients' HTTP client, base URL, headers and
// credentials.

// EmbeddingProvider is implemented by providers that embed texts (OpenAI-compatible and Ollama;
// the Anthropic API has no embeddings).
type EmbeddingProvider interface {
	// Embed sends one embedding request (req.Input set) and returns one vector per input in
	// Response.Embeddings, with the provider's usage.
	Embed(ctx context.Context, req Request) (*Response, error)
}

// ErrEmbeddingsUnsupported is returned for an embedding call to a provider whose API has none.
var ErrEmbeddingsUnsupported = fault.New(fault.KindInvalid, fault.CodeInvalid, "the provider's API has no embeddings (use an openai or ollama provider)")

// Embeds reports whether p's API has embeddings (looking through the retry
// wrapper).
func Embeds(p Provider) bool {
	if rp, ok := p.(*retryProvider); ok {
		p = rp.inner
	}
	switch p.(type) {
	case *anthropicClient:
		return false
	case EmbeddingProvider:
		return true
	}
	return false
}

// embed runs an embedding request on p (the Router's path).
func embed(ctx context.Context, p Provider, req Request) (*Response, error) {
	ep, ok := p.(EmbeddingProvider)
	if !ok {
		return nil, fmt.Errorf("llm provider %q: %w", p.ID(), ErrEmbeddingsUnsupported)
	}
	return ep.Embed(ctx, req)
}

// Embed is retried like Chat (nothing reaches the caller before the answer).
func (r *retryProvider) Embed(ctx context.Context, req Request) (*Response, error) {
	ep, ok := r.inner.(EmbeddingProvider)
	if !ok {
		return nil, fmt.Errorf("llm provider %q: %w", r.inner.ID(), ErrEmbeddingsUnsupported)
	}
	return r.run(ctx, func(ctx context.Context) (*Response, error) { return ep.Embed(ctx, req) }, nil)
}

func (c *anthropicClient) Embed(context.Context, Request) (*Response, error) {
	return nil, fmt.Errorf("llm provider %q: %w", c.id, ErrEmbeddingsUnsupported)
}

// checkEmbeddings holds a provider's answer to what was asked: one vector
// per input, all of one non-zero length.
func (h *httpBase) checkEmbeddings(vecs [][]float32, inputs int) error {
	if len(vecs) != inputs {
		return &ProviderError{Provider: h.id, Address: h.base, Message: fmt.Sprintf("unreadable response: %d embeddings for %d inputs", len(vecs), inputs)}
	}
	for i, v := range vecs {
		if len(v) == 0 || len(v) != len(vecs[0]) {
			return &ProviderError{Provider: h.id, Address: h.base, Message: fmt.Sprintf("unreadable response: embedding %d has %d dimensions, the first %d", i, len(v), len(vecs[0]))}
		}
	}
	return nil
}

type oaEmbedRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

type oaEmbedResponse struct {
	Model string `json:"model"`
	Data  []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage *struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
	Error *oaErrorBody `json:"error"`
}

// Embed implements EmbeddingProvider: POST {base}/embeddings.
func (c *openAIClient) Embed(ctx context.Context, req Request) (*Response, error) {
	actx, cancel := c.withTimeout(ctx)
	defer cancel()
	body := oaEmbedRequest{Model: req.Model, Input: req.Input, EncodingFormat: "float", Dimensions: req.Dimensions}
	hresp, err := c.post(actx, "/embeddings", body, c.setAuth)
	if err != nil {
		return nil, err
	}
	var out oaEmbedResponse
	if err := c.decodeJSON(actx, hresp, &out); err != nil {
		return nil, err
	}
	if out.Error != nil {
		return nil, c.streamError(out.Error)
	}
	sort.SliceStable(out.Data, func(i, j int) bool { return out.Data[i].Index < out.Data[j].Index })
	resp := &Response{RequestID: requestID(hresp.Header, "x-request-id", ""), Model: out.Model, FinishReason: "stop"}
	resp.Embeddings = make([][]float32, len(out.Data))
	for i, d := range out.Data {
		resp.Embeddings[i] = d.Embedding
	}
	if err := c.checkEmbeddings(resp.Embeddings, len(req.Input)); err != nil {
		return nil, err
	}
	if out.Usage != nil {
		resp.Usage = Usage{InputTokens: max(out.Usage.PromptTokens, out.Usage.TotalTokens)}
		resp.UsageReported = true
	}
	return resp, nil
}

type olEmbedRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Truncate   bool     `json:"truncate"`
	Dimensions int      `json:"dimensions,omitempty"`
}

type olEmbedResponse struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	PromptEvalCount *int64      `json:"prompt_eval_count"`
	Error           string      `json:"error"`
}

// Embed implements EmbeddingProvider: POST {base}/api/embed (Ollama 0.3+),
// inputs longer than the model's context truncated by Ollama.
func (c *ollamaClient) Embed(ctx context.Context, req Request) (*Response, error) {
	actx, cancel := c.withTimeout(ctx)
	defer cancel()
	body := olEmbedRequest{Model: req.Model, Input: req.Input, Truncate: true, Dimensions: req.Dimensions}
	hresp, err := c.post(actx, "/api/embed", body, c.setAuth)
	if err != nil {
		return nil, err
	}
	var out olEmbedResponse
	if err := c.decodeJSON(actx, hresp, &out); err != nil {
		return nil, err
	}
	if out.Error != "" {
		return nil, &ProviderError{Provider: c.id, Address: c.base, Message: out.Error}
	}
	if err := c.checkEmbeddings(out.Embeddings, len(req.Input)); err != nil {
		return nil, err
	}
	resp := &Response{Model: out.Model, Embeddings: out.Embeddings, FinishReason: "stop"}
	if out.PromptEvalCount != nil {
		resp.Usage = Usage{InputTokens: *out.PromptEvalCount}
		resp.UsageReported = true
	}
	return resp, nil
}
