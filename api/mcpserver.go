package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/scrub"
)

// MCPServerPath is where the gateway's own MCP server answers.
const MCPServerPath = "/mcp"

// MCPServerFeature is the gateway as an MCP server (docs/mcp.md, "Agents
// as MCP tools"): a streamable-HTTP endpoint at /mcp, behind the gateway's
// key authentication, on the official Go SDK. Each enabled agent the key
// may use is a tool ask_<agent id> {text, user_id?} described by the
// agent's description; a call runs the agent through chat.Service.Chat,
// the path of POST /api/v1/chat (admission, ledger with source mcp_server,
// budgets), in a new session.
//
// The server is stateless (no Mcp-Session-Id; every POST is answered with
// one JSON response): tool calls are request/response, and the gateway
// keeps no MCP session state between requests or across restarts.
type MCPServerFeature struct {
	Chat    *chat.Service
	Agents  *agentdef.Registry
	Version string
}

// Register implements Feature; r is the authenticated /mcp group.
func (f *MCPServerFeature) Register(r fiber.Router) {
	// The streamable-HTTP transport's methods (a stateless server answers
	// GET and DELETE 405).
	r.Post("", f.serve)
	r.Get("", f.serve)
	r.Delete("", f.serve)
}

func (f *MCPServerFeature) serve(c *fiber.Ctx) error {
	p := Principal(c)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server(p) }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true,
		// The key (Authorization: Bearer) guards the route: a page a
		// rebinding DNS name opens cannot send it.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        int64(len(c.Body())) + 1,
	})
	fasthttpadaptor.NewFastHTTPHandler(h)(c.Context())
	return nil
}

// askInput is the arguments of an ask_<agent> tool.
type askInput struct {
	Text   string `json:"text" jsonschema:"the message to the agent"`
	UserID string `json:"user_id,omitempty" jsonschema:"the end user the message is from (per-user limits and chargeback)"`
}

// ToolName is the MCP tool name of an agent.
func ToolName(agentID string) string { return "ask_" + agentID }

// server is the MCP server one caller sees: a tool per agent it may use.
func (f *MCPServerFeature) server(p *auth.Principal) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentry", Version: f.Version}, nil)
	for _, def := range f.Agents.List() {
		if !def.IsEnabled() || !p.MayUseAgent(def.ID) {
			continue
		}
		agentID := def.ID
		desc := strings.TrimSpace(def.Description)
		if desc == "" {
			desc = fmt.Sprintf("Ask the Agentry agent %s.", agentID)
		}
		mcp.AddTool(srv, &mcp.Tool{Name: ToolName(agentID), Title: def.Name, Description: desc},
			func(ctx context.Context, _ *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
				return f.ask(auth.WithPrincipal(ctx, p), agentID, in), nil, nil
			})
	}
	return srv
}

// ask runs the agent for one tool call. A refusal (a budget, a forbidden
// agent, bad input) is a tool error result carrying the gateway's code, so
// the calling model reads why.
func (f *MCPServerFeature) ask(ctx context.Context, agentID string, in askInput) *mcp.CallToolResult {
	runID, responseID := chat.NewRunIDs()
	req := chat.Request{AgentID: agentID, Text: in.Text, UserID: in.UserID, Username: in.UserID, Source: llm.SourceMCPServer,
		Interactive: true, RunID: runID, ResponseID: responseID,
		SessionID: "mcp-" + strings.TrimPrefix(runID, "run_"), CreateSession: true, NewSession: true}
	reply, err := f.Chat.Chat(ctx, req, nil)
	if err != nil {
		msg := "internal error"
		if e := faultError(err); e != nil {
			msg = scrub.String(e.Message)
			if e.Code != "" {
				msg = fmt.Sprintf("%s (%d %s)", msg, e.Status, e.Code)
			}
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: capMessage(msg)}}}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: reply.Reply}},
		Meta: mcp.Meta{"agentry/run_id": reply.RunID, "agentry/session_id": reply.SessionID, "agentry/response_id": reply.ResponseID}}
}
