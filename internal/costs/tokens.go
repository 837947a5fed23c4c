package costs

import "github.com/agentryhq/agentry/internal/llm"

// Token estimates. Admission must reserve before the provider has counted
// anything, and a stream cut before its usage event must still be charged,
// so the gateway estimates. The estimates are deliberately conservative:
// one token per 3 bytes of UTF-8 (English text averages about 4 characters
// per token with the common tokenizers) plus a per-message overhead for the
// chat template.
const (
	bytesPerToken      = 3
	perMessageOverhead = 4
	perToolOverhead    = 8
	perRequestOverhead = 3
)

func tokensForBytes(n int) int64 {
	if n <= 0 {
		return 0
	}
	return int64((n + bytesPerToken - 1) / bytesPerToken)
}

// EstimateInputTokens estimates the prompt tokens of a request: messages,
// tool calls and results, and tool definitions.
func EstimateInputTokens(req llm.Request) int64 {
	var n int64 = perRequestOverhead + max(req.ReserveInputTokens, 0)
	for _, m := range req.Messages {
		b := len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			b += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
		n += tokensForBytes(b) + perMessageOverhead
	}
	for _, t := range req.Tools {
		n += tokensForBytes(len(t.Name)+len(t.Description)+len(t.Parameters)) + perToolOverhead
	}
	// Embedding inputs: the texts, one token of overhead each.
	for _, in := range req.Input {
		n += tokensForBytes(len(in)) + 1
	}
	return n
}

// estimateOutputTokens estimates the tokens of what a (possibly partial)
// response carried.
func estimateOutputTokens(resp *llm.Response) int64 {
	if resp == nil {
		return 0
	}
	b := len(resp.Content)
	for _, tc := range resp.ToolCalls {
		b += len(tc.Name) + len(tc.Arguments)
	}
	return tokensForBytes(b)
}
