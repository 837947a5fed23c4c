package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/toolgrant"
)

// KnowledgeSearchTool is the tool an agent that names knowledge bases may
// call to search them again (knowledge_search {query, base?}).
const KnowledgeSearchTool = "knowledge_search"

// Knowledge is what the toolbox needs of knowledge bases
// (*knowledge.Service implements it).
type Knowledge interface {
	// Passages is the text added to the model's context before a turn:
	// the best passages of bases for text, with citations ("" for none).
	Passages(ctx context.Context, bases []string, text string, meta llm.CallMeta) (string, error)
	// SearchText answers a knowledge_search call over bases.
	SearchText(ctx context.Context, bases []string, query string) (string, error)
	// Describe says what bases hold, for the tool's description.
	Describe(bases []string) string
}

// knowledgeTool is the schema of knowledge_search for an agent's bases.
func (t *Toolbox) knowledgeTool(bases []string) llm.Tool {
	desc := "Search the knowledge bases for passages about a question; returns passages with their source and position (cite them)."
	if d := t.Knowledge.Describe(bases); d != "" {
		desc += " Bases: " + d
	}
	enum, _ := json.Marshal(bases)
	return llm.Tool{Name: KnowledgeSearchTool, Description: desc,
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},"base":{"type":"string","description":"one base to search (default: all the agent's bases)","enum":` + string(enum) + `}},"required":["query"]}`)}
}

// WithKnowledge is system followed by the passages of the agent's
// knowledge bases that match the user's text (nothing when the agent names
// no base). Retrieval that fails is logged and leaves the prompt as it is:
// the turn goes on, and the model can still call knowledge_search.
func (t *Toolbox) WithKnowledge(ctx context.Context, def *agentdef.Definition, system, userText string, meta llm.CallMeta) string {
	if t == nil || t.Knowledge == nil || len(def.Knowledge) == 0 || strings.TrimSpace(userText) == "" {
		return system
	}
	if meta.AgentID == "" {
		meta.AgentID = def.ID
	}
	meta.CallID, meta.Source = "", llm.SourceEmbedding
	block, err := t.Knowledge.Passages(ctx, def.Knowledge, userText, meta)
	if err != nil {
		slog.Default().Warn("knowledge passages not added to the prompt", "agent", def.ID, "err", err)
		return system
	}
	if block == "" {
		return system
	}
	if system == "" {
		return block
	}
	return system + "\n\n" + block
}

// knowledgeSearch runs a knowledge_search call; allowed carries the
// agent's bases as knowledge grants (Definition.ToolGrants).
func (t *Toolbox) knowledgeSearch(ctx context.Context, allowed []string, raw json.RawMessage) (ToolResult, error) {
	var args struct {
		Query string `json:"query"`
		Base  string `json:"base"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return ToolResult{Content: "bad arguments: " + err.Error(), IsError: true}, nil
	}
	if t.Knowledge == nil {
		return ToolResult{Content: "knowledge bases are not enabled on this gateway", IsError: true}, nil
	}
	bases := toolgrant.KnowledgeBases(allowed)
	if args.Base != "" {
		if !slices.Contains(bases, args.Base) {
			return ToolResult{Content: fmt.Sprintf("unknown knowledge base %q (this agent may search: %s)", args.Base, strings.Join(bases, ", ")), IsError: true}, nil
		}
		bases = []string{args.Base}
	}
	if strings.TrimSpace(args.Query) == "" {
		return ToolResult{Content: "query is empty", IsError: true}, nil
	}
	text, err := t.Knowledge.SearchText(ctx, bases, args.Query)
	if err != nil {
		if ctx.Err() != nil {
			return ToolResult{}, ctx.Err()
		}
		return ToolResult{Content: "knowledge search failed: " + err.Error(), IsError: true}, nil
	}
	return ToolResult{Content: text}, nil
}
