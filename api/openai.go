package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/hangup"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/scrub"
)

// OpenAIPrefix is where the OpenAI-compatible routes live (outside /api/v1,
// where OpenAI clients look for them: base URL http://host:port/v1).
const OpenAIPrefix = "/v1"

// OpenAIFeature serves the OpenAI Chat Completions protocol in front of the
// agents (docs/openai-compat.md):
//
//	POST /v1/chat/completions   the model names an agent (agent/<id> or <id>)
//	GET  /v1/models             the agents the key may use
//	GET  /v1/models/{model}     one of them
//
// Every call runs through chat.Service.Chat, the path of POST /api/v1/chat:
// the same admission, ledger (source openai_compat), budgets, one-run
// overrides and role rules. Errors are answered in OpenAI's envelope
// {"error": {"message", "type", "param", "code"}} (Server.errorHandler).
type OpenAIFeature struct {
	Chat   *chat.Service
	Agents *agentdef.Registry
	// Hangups cancels the run of a caller that disconnects.
	Hangups *hangup.Watcher
}

// Register implements Feature; r is the authenticated /v1 group.
func (f *OpenAIFeature) Register(r fiber.Router) {
	r.Post("/chat/completions", f.completions)
	r.Get("/models", f.models)
	r.Get("/models/*", f.model)
}

// oaiRequest is the part of OpenAI's chat completion request the gateway
// reads. Fields it does not know (top_p, seed, stop, response_format ...)
// are accepted and ignored: the agent's configuration decides them.
type oaiRequest struct {
	Model               string          `json:"model" maxlen:"200"`
	Messages            []oaiMessage    `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *oaiStreamOpts  `json:"stream_options"`
	User                string          `json:"user" maxlen:"191"`
	Temperature         *float64        `json:"temperature"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Tools               json.RawMessage `json:"tools"`
	Functions           json.RawMessage `json:"functions"`
	N                   *int            `json:"n"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Modalities          []string        `json:"modalities"`
	Audio               json.RawMessage `json:"audio"`
}

type oaiStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaiMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

type oaiPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// oaiInvalid is a 400 naming the OpenAI parameter at fault.
func oaiInvalid(param, code, format string, args ...any) *Error {
	return badRequest(format, args...).WithCode(code).With("param", param)
}

// present reports whether a raw JSON value was sent and is not null or empty.
func present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "[]" && s != "{}"
}

// agentOfModel is the agent id a model name names: agent/<id> or <id>.
func agentOfModel(model string) string {
	return strings.TrimPrefix(strings.TrimSpace(model), "agent/")
}

// parse turns the OpenAI request into the chat request, refusing what the
// agent cannot take before anything is stored or sent.
func (f *OpenAIFeature) parse(c *fiber.Ctx, b *oaiRequest) (chat.Request, error) {
	if b.Model == "" {
		return chat.Request{}, oaiInvalid("model", "missing_required_parameter", "model is required: agent/<agent id> (GET /v1/models lists them)")
	}
	id := agentOfModel(b.Model)
	def, ok := f.Agents.Get(id)
	if !ok || id == "" {
		return chat.Request{}, oaiInvalid("model", "model_not_found", "the model %q does not exist: name an agent as agent/<agent id> (GET /v1/models lists them)", b.Model)
	}
	if b.N != nil && *b.N != 1 {
		return chat.Request{}, oaiInvalid("n", "unsupported_value", "n=%d is not supported: an agent gives one answer (n must be 1)", *b.N)
	}
	if b.Logprobs != nil && *b.Logprobs {
		return chat.Request{}, oaiInvalid("logprobs", "unsupported_parameter", "logprobs is not supported by agents")
	}
	if b.TopLogprobs != nil && *b.TopLogprobs != 0 {
		return chat.Request{}, oaiInvalid("top_logprobs", "unsupported_parameter", "top_logprobs is not supported by agents")
	}
	if present(b.Tools) {
		return chat.Request{}, oaiInvalid("tools", "unsupported_parameter", "tools are not supported: the agent uses its own tools inside the gateway")
	}
	if present(b.Functions) {
		return chat.Request{}, oaiInvalid("functions", "unsupported_parameter", "functions are not supported: the agent uses its own tools inside the gateway")
	}
	if present(b.Audio) || len(b.Modalities) > 1 || (len(b.Modalities) == 1 && b.Modalities[0] != "text") {
		return chat.Request{}, oaiInvalid("modalities", "unsupported_value", "agents answer text only")
	}
	if len(b.Messages) == 0 {
		return chat.Request{}, oaiInvalid("messages", "empty_array", "messages must hold at least one message, the last one from the user")
	}
	var turns []llm.Message
	for i, m := range b.Messages {
		text, err := messageText(i, m)
		if err != nil {
			return chat.Request{}, err
		}
		switch m.Role {
		case "system", "developer":
			// The agent's own system prompt governs (docs/openai-compat.md).
		case "user":
			turns = append(turns, llm.Message{Role: llm.RoleUser, Content: text})
		case "assistant":
			if present(m.ToolCalls) {
				return chat.Request{}, oaiInvalid(fmt.Sprintf("messages[%d].tool_calls", i), "unsupported_parameter",
					"messages[%d]: assistant tool calls cannot be sent: the agent's tools run inside the gateway", i)
			}
			turns = append(turns, llm.Message{Role: llm.RoleAssistant, Content: text})
		case "tool", "function":
			return chat.Request{}, oaiInvalid(fmt.Sprintf("messages[%d].role", i), "unsupported_value",
				"messages[%d]: role %s is not supported: the agent's tools run inside the gateway", i, m.Role)
		default:
			return chat.Request{}, oaiInvalid(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				"messages[%d]: unknown role %q (system, developer, user or assistant)", i, m.Role)
		}
	}
	last := b.Messages[len(b.Messages)-1]
	if last.Role != "user" || len(turns) == 0 || strings.TrimSpace(turns[len(turns)-1].Content) == "" {
		return chat.Request{}, oaiInvalid("messages", "invalid_value", "the last message must be a user message with text")
	}
	ov := &chat.Overrides{Temperature: b.Temperature, MaxTokens: b.MaxTokens}
	if b.MaxCompletionTokens != nil {
		ov.MaxTokens = b.MaxCompletionTokens
	}
	choice, err := toolChoice(b.ToolChoice)
	if err != nil {
		return chat.Request{}, err
	}
	ov.ToolChoice = choice
	req := chat.Request{AgentID: def.ID, Text: turns[len(turns)-1].Content, UserID: b.User, Username: b.User,
		Overrides: ov, Source: llm.SourceOpenAI, Interactive: true}
	if sid := strings.TrimSpace(c.Get(HeaderSessionID)); sid != "" {
		// Continue a session the gateway keeps: its stored conversation
		// is the history; the request's earlier messages are not sent.
		if len(sid) > 191 {
			return chat.Request{}, badRequest("%s is longer than 191 characters", HeaderSessionID).With("param", HeaderSessionID)
		}
		req.SessionID = sid
	} else {
		// Stateless, as OpenAI is: a new session per call, the earlier
		// messages sent as given (leading assistant turns dropped, as a
		// stored history starts at a user turn).
		history := turns[:len(turns)-1]
		for len(history) > 0 && history[0].Role != llm.RoleUser {
			history = history[1:]
		}
		req.History = append(make([]llm.Message, 0, len(history)), history...)
		req.RunID, req.ResponseID = chat.NewRunIDs()
		req.SessionID, req.CreateSession, req.NewSession = "oai-"+strings.TrimPrefix(req.RunID, "run_"), true, true
	}
	return req, nil
}

// messageText is the text of a message's content: a string, null, or an
// array of text parts. Other parts (image_url, input_audio, file) are
// refused: agents take text.
func messageText(i int, m oaiMessage) (string, error) {
	raw := strings.TrimSpace(string(m.Content))
	if raw == "" || raw == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return "", oaiInvalid(fmt.Sprintf("messages[%d].content", i), "invalid_type", "messages[%d].content: %v", i, err)
		}
		return s, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", oaiInvalid(fmt.Sprintf("messages[%d].content", i), "invalid_type", "messages[%d].content must be a string or an array of content parts", i)
	}
	texts := make([]string, 0, len(parts))
	for j, raw := range parts {
		var p oaiPart
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", oaiInvalid(fmt.Sprintf("messages[%d].content[%d]", i, j), "invalid_type", "messages[%d].content[%d] must be a content part object", i, j)
		}
		if p.Type != "text" {
			return "", oaiInvalid(fmt.Sprintf("messages[%d].content[%d].type", i, j), "unsupported_content_type",
				"messages[%d].content[%d]: content parts of type %q are not supported: agents take text", i, j, p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// toolChoice maps OpenAI's tool_choice ("auto", "none", "required" or
// {"type": "function", "function": {"name": ...}}) to the one-run override.
func toolChoice(raw json.RawMessage) (string, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "", nil
	}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		switch name {
		case llm.ToolChoiceAuto, llm.ToolChoiceNone, llm.ToolChoiceRequired:
			return name, nil
		}
		return "", oaiInvalid("tool_choice", "invalid_value", "tool_choice %q is not auto, none, required or a function", name)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Type != "function" || obj.Function.Name == "" {
		return "", oaiInvalid("tool_choice", "invalid_value", `tool_choice must be auto, none, required or {"type": "function", "function": {"name": ...}}`)
	}
	return obj.Function.Name, nil
}

func (f *OpenAIFeature) completions(c *fiber.Ctx) error {
	var b oaiRequest
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	req, err := f.parse(c, &b)
	if err != nil {
		return err
	}
	if b.Stream {
		return f.stream(c, &b, req)
	}
	ctx, stop := f.Hangups.Watch(c.UserContext(), c.Context().Conn())
	defer stop()
	reply, err := f.Chat.Chat(ctx, req, nil)
	if err != nil {
		return err
	}
	setRunHeaders(c, reply.SessionID, reply.RunID, reply.ResponseID)
	return c.JSON(oaiCompletion{
		ID: completionID(reply.ResponseID), Object: "chat.completion", Created: time.Now().Unix(), Model: b.Model,
		Choices: []oaiChoice{{Index: 0, Message: oaiAnswer{Role: "assistant", Content: reply.Reply}, FinishReason: "stop"}},
		Usage:   usageOf(reply.Usage),
	})
}

type oaiCompletion struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []oaiChoice `json:"choices"`
	Usage   *oaiUsage   `json:"usage"`
}

type oaiChoice struct {
	Index        int       `json:"index"`
	Message      oaiAnswer `json:"message"`
	FinishReason string    `json:"finish_reason"`
}

type oaiAnswer struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type oaiUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usageOf is the run's usage as the ledger settled it: the sum over the
// run's LLM calls (tool turns included).
func usageOf(u llm.Usage) *oaiUsage {
	in := u.InputTokens + u.CachedInputTokens + u.CacheCreationTokens
	out := &oaiUsage{PromptTokens: in, CompletionTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens}
	out.PromptTokensDetails.CachedTokens = u.CachedInputTokens
	out.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return out
}

func completionID(responseID string) string {
	return "chatcmpl-" + strings.TrimPrefix(responseID, "resp_")
}

// stream answers OpenAI's server-sent events: chat.completion.chunk frames
// (the first carries the role, then one per text delta), a last chunk with
// finish_reason, a usage chunk when stream_options.include_usage, then
// `data: [DONE]`. As on POST /api/v1/chat/stream, anything that fails
// before the first text is an HTTP error in the envelope; a failure after
// is a `data: {"error": {...}}` frame, which the SDKs raise.
func (f *OpenAIFeature) stream(c *fiber.Ctx, b *oaiRequest, req chat.Request) error {
	ctx := c.UserContext()
	if _, _, err := f.Chat.Prepare(ctx, &req); err != nil {
		return err
	}
	if req.RunID == "" {
		req.RunID, req.ResponseID = chat.NewRunIDs()
	}
	sessionID := chat.SessionOf(ctx, &req)
	runCtx, stop := f.Hangups.Watch(auth.WithPrincipal(detached.Context(ctx), auth.FromContext(ctx)), c.Context().Conn())
	run := startStreamRun(runCtx, f.Chat, req)
	select {
	case <-run.started:
	case res := <-run.done:
		if res.err != nil {
			stop()
			return res.err
		}
		run.done <- res
	}
	setRunHeaders(c, sessionID, req.RunID, req.ResponseID)
	model, _ := json.Marshal(b.Model)
	head := `{"id":"` + completionID(req.ResponseID) + `","object":"chat.completion.chunk","created":` +
		strconv.FormatInt(time.Now().Unix(), 10) + `,"model":` + string(model) + `,"choices":[`
	includeUsage := b.StreamOptions != nil && b.StreamOptions.IncludeUsage
	streamSSE(c, func(out sse) {
		defer stop()
		out.Data(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
		res, ok := run.forward(out, stop, func(out sse, text string) {
			content, _ := json.Marshal(text)
			out.Data(head + `{"index":0,"delta":{"content":` + string(content) + `},"finish_reason":null}]}`)
		})
		if !ok {
			return
		}
		if res.err != nil {
			e := faultError(res.err)
			if e == nil {
				e = &Error{Status: fiber.StatusInternalServerError, Message: "internal error"}
			}
			payload, _ := json.Marshal(openAIErrorBody(e))
			out.Data(string(payload))
			_ = out.Flush()
			return
		}
		out.Data(head + `{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		if includeUsage {
			usage, _ := json.Marshal(usageOf(res.reply.Usage))
			out.Data(head + `],"usage":` + string(usage) + `}`)
		}
		out.Data("[DONE]")
		_ = out.Flush()
	})
	return nil
}

type oaiModel struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Description string `json:"description,omitempty"`
}

func modelOf(def *agentdef.Definition) oaiModel {
	return oaiModel{ID: "agent/" + def.ID, Object: "model", OwnedBy: "agentry", Description: def.Description}
}

// models lists the enabled agents the key may use, as agent/<id>.
func (f *OpenAIFeature) models(c *fiber.Ctx) error {
	p := Principal(c)
	data := []oaiModel{}
	for _, def := range f.Agents.List() {
		if def.IsEnabled() && p.MayUseAgent(def.ID) {
			data = append(data, modelOf(def))
		}
	}
	return c.JSON(fiber.Map{"object": "list", "data": data})
}

func (f *OpenAIFeature) model(c *fiber.Ctx) error {
	name := c.Params("*")
	def, ok := f.Agents.Get(agentOfModel(name))
	if !ok || !def.IsEnabled() || !Principal(c).MayUseAgent(def.ID) {
		return notFound("the model %q does not exist", name).WithCode("model_not_found").With("param", "model")
	}
	return c.JSON(modelOf(def))
}

// isOpenAIPath reports whether a request is one of the OpenAI-compatible
// routes, whose errors take OpenAI's envelope.
func isOpenAIPath(path string) bool {
	return path == OpenAIPrefix || strings.HasPrefix(path, OpenAIPrefix+"/")
}

// openAIParams renames the chat path's field names to the OpenAI
// parameters they came from.
var openAIParams = map[string]string{
	"overrides.temperature": "temperature",
	"overrides.max_tokens":  "max_tokens",
	"overrides.tool_choice": "tool_choice",
	"text":                  "messages",
	"agent_id":              "model",
	"user_id":               "user",
}

// openAIErrorBody is the envelope OpenAI's SDKs parse into their typed API
// errors: {"error": {"message", "type", "param", "code"}}.
func openAIErrorBody(e *Error) fiber.Map {
	var param any
	if v, ok := e.Fields["param"].(string); ok {
		param = v
	} else if v, ok := e.Fields["field"].(string); ok {
		if p, ok := openAIParams[v]; ok {
			v = p
		}
		param = v
	}
	var code any
	if e.Code != "" {
		code = e.Code
	}
	return fiber.Map{"error": fiber.Map{"message": capMessage(scrub.String(e.Message)), "type": openAIType(e), "param": param, "code": code}}
}

// openAIType is the error's type in OpenAI's vocabulary.
func openAIType(e *Error) string {
	switch {
	case e.Status == fiber.StatusUnauthorized:
		return "authentication_error"
	case e.Status == fiber.StatusForbidden:
		return "permission_error"
	case e.Status == fiber.StatusPaymentRequired:
		return "insufficient_quota"
	case e.Status == fiber.StatusTooManyRequests:
		return "rate_limit_error"
	case e.Status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// openAIError adapts an error answer of an OpenAI-compatible route: a body
// over the size limit is a 400 naming messages (what OpenAI answers for an
// oversized request), and a budget refusal tells the SDKs not to retry
// (x-should-retry: false; they would otherwise retry some statuses).
func openAIError(c *fiber.Ctx, e *Error) (int, fiber.Map) {
	status := e.Status
	if status == fiber.StatusRequestEntityTooLarge {
		e = &Error{Status: fiber.StatusBadRequest, Message: e.Message + ": the messages are over the gateway's body limit (server.max_body_bytes)",
			Code: "request_too_large", Fields: map[string]any{"param": "messages"}}
		status = fiber.StatusBadRequest
	}
	if status == fiber.StatusPaymentRequired || status == fiber.StatusForbidden {
		c.Set("X-Should-Retry", "false")
	}
	return status, openAIErrorBody(e)
}
