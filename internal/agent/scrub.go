package agent

import (
	"bytes"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/scrub"
)

// ScrubResponse removes the configured secrets (provider keys, channel and
// store secrets; scrub.Secrets) from a successful provider answer: its text
// and its tool calls' arguments. A provider can echo its own key (a prompt
// asked it to, a proxy reflects headers); the answer reaches the caller, the
// stored conversation, the run log and deliveries, so each executor scrubs
// it once, where the answer enters the loop (chat: inProcess.CallLLM;
// durable runs: the LLM turn activity before the run log). Credential shapes
// are left alone: a reply is content, and "sk-..." in a code example is no
// secret of ours. resp is returned, changed in place; nil stays nil.
func ScrubResponse(resp *llm.Response) *llm.Response {
	if resp == nil {
		return nil
	}
	resp.Content = scrub.Secrets(resp.Content)
	for i, c := range resp.ToolCalls {
		if args := scrub.SecretsJSON(c.Arguments); !bytes.Equal(args, c.Arguments) {
			resp.ToolCalls[i].Arguments = args
		}
	}
	return resp
}
