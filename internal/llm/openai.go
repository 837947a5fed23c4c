package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// openAIClient speaks the OpenAI chat completions API (OpenAI, vLLM, LM Studio, OpenRouter, ...):
// POST {base}/chat/completions.
type openAIClient struct{ *httpBase }

type oaMessage struct {
	Role       string       `json:"role"`
	Content    any          `json:"content"` // string, or null on an assistant message with tool calls
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	Index    *int   `json:"index,omitempty"` // streaming deltas only
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaRequest struct {
	Model               string           `json:"model"`
	Messages            []oaMessage      `json:"messages"`
	Tools               []oaTool         `json:"tools,omitempty"`
	ToolChoice          any              `json:"tool_choice,omitempty"`
	Temperature         *float64         `json:"temperature,omitempty"`
	MaxTokens           int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens int              `json:"max_completion_tokens,omitempty"`
	Stream              bool             `json:"stream,omitempty"`
	StreamOptions       *oaStreamOptions `json:"stream_options,omitempty"`
}

type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *oaUsage) normalise() Usage {
	out := Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedInputTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

type oaErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

type oaResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string      `json:"content"`
			Refusal   *string      `json:"refusal"`
			ToolCalls []oaToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage     `json:"usage"`
	Error *oaErrorBody `json:"error"`
}

type oaChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content   *string      `json:"content"`
			Refusal   *string      `json:"refusal"`
			ToolCalls []oaToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage     `json:"usage"`
	Error *oaErrorBody `json:"error"`
}

func (c *openAIClient) setAuth(h http.Header) {
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
}

// usesMaxCompletionTokens: OpenAI itself deprecated max_tokens (its reasoning models reject it);
// most compatible servers only know max_tokens.
func (c *openAIClient) usesMaxCompletionTokens() bool {
	return strings.EqualFold(c.hostname(), "api.openai.com")
}

func (c *openAIClient) buildRequest(req Request, stream bool) oaRequest {
	out := oaRequest{Model: req.Model, Temperature: req.Temperature, Stream: stream}
	if req.MaxTokens > 0 {
		if c.usesMaxCompletionTokens() {
			out.MaxCompletionTokens = req.MaxTokens
		} else {
			out.MaxTokens = req.MaxTokens
		}
	}
	if stream {
		out.StreamOptions = &oaStreamOptions{IncludeUsage: true}
	}
	out.Messages = make([]oaMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		om := oaMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		if m.Role != RoleTool {
			om.ToolCallID = ""
		}
		if len(m.ToolCalls) > 0 {
			if m.Content == "" {
				om.Content = nil
			}
			for _, tc := range m.ToolCalls {
				otc := oaToolCall{ID: tc.ID, Type: "function"}
				otc.Function.Name = tc.Name
				otc.Function.Arguments = string(argumentsOrEmpty(tc.Arguments))
				om.ToolCalls = append(om.ToolCalls, otc)
			}
		}
		out.Messages = append(out.Messages, om)
	}
	if len(req.Tools) > 0 {
		for _, t := range req.Tools {
			ot := oaTool{Type: "function"}
			ot.Function.Name = t.Name
			ot.Function.Description = t.Description
			ot.Function.Parameters = schemaOrEmpty(t.Parameters)
			out.Tools = append(out.Tools, ot)
		}
		switch req.ToolChoice {
		case "":
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
			out.ToolChoice = req.ToolChoice
		default:
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": req.ToolChoice}}
		}
	}
	return out
}

func (c *openAIClient) Chat(ctx context.Context, req Request) (*Response, error) {
	actx, cancel := c.withTimeout(ctx)
	defer cancel()
	hresp, err := c.post(actx, "/chat/completions", c.buildRequest(req, false), c.setAuth)
	if err != nil {
		return nil, err
	}
	var body oaResponse
	if err := c.decodeJSON(actx, hresp, &body); err != nil {
		return nil, err
	}
	if body.Error != nil {
		return nil, c.streamError(body.Error)
	}
	resp := &Response{RequestID: requestID(hresp.Header, "x-request-id", body.ID), Model: body.Model}
	if len(body.Choices) > 0 {
		ch := body.Choices[0]
		switch {
		case ch.Message.Content != nil:
			resp.Content = *ch.Message.Content
		case ch.Message.Refusal != nil:
			resp.Content = *ch.Message.Refusal
		}
		resp.FinishReason = ch.FinishReason
		for _, tc := range ch.Message.ToolCalls {
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{
				ID: tc.ID, Name: tc.Function.Name, Arguments: normaliseArguments([]byte(tc.Function.Arguments)),
			})
		}
	}
	if body.Usage != nil {
		resp.Usage = body.Usage.normalise()
		resp.UsageReported = true
	}
	return resp, nil
}

// toolCallAssembler joins streamed tool-call fragments by their index.
type toolCallAssembler struct {
	order []int
	calls map[int]*struct {
		id, name string
		args     strings.Builder
	}
}

func (a *toolCallAssembler) add(pos int, d oaToolCall) {
	if a.calls == nil {
		a.calls = map[int]*struct {
			id, name string
			args     strings.Builder
		}{}
	}
	idx := pos
	switch {
	case d.Index != nil:
		idx = *d.Index
	case d.ID == "" && len(a.order) > 0:
		idx = a.order[len(a.order)-1] // a continuation without index belongs to the last call
	case d.ID != "":
		idx = len(a.order) + 1000 // servers that omit index send each call whole, with an id
	}
	tc, ok := a.calls[idx]
	if !ok {
		tc = &struct {
			id, name string
			args     strings.Builder
		}{}
		a.calls[idx] = tc
		a.order = append(a.order, idx)
	}
	if d.ID != "" {
		tc.id = d.ID
	}
	if d.Function.Name != "" {
		tc.name = d.Function.Name
	}
	tc.args.WriteString(d.Function.Arguments)
}

func (a *toolCallAssembler) result() []ToolCall {
	var out []ToolCall
	for _, idx := range a.order {
		tc := a.calls[idx]
		out = append(out, ToolCall{ID: tc.id, Name: tc.name, Arguments: normaliseArguments([]byte(tc.args.String()))})
	}
	return out
}

func (c *openAIClient) Stream(ctx context.Context, req Request, onDelta func(string) error) (*Response, error) {
	resp := &Response{}
	var content strings.Builder
	var tools toolCallAssembler
	var sawFinish bool
	var headerID string
	err := c.streamAttempt(ctx, "/chat/completions", c.buildRequest(req, true), c.setAuth,
		func(h http.Header) { headerID = h.Get("x-request-id") },
		func(line []byte) (bool, error) {
			data, ok := sseData(line)
			if !ok || len(data) == 0 {
				return false, nil
			}
			if string(data) == "[DONE]" {
				return true, nil
			}
			var ch oaChunk
			if err := json.Unmarshal(data, &ch); err != nil {
				return false, &ProviderError{Provider: c.id, Address: c.base, Message: "unreadable stream chunk: " + err.Error(), Err: err}
			}
			if ch.Error != nil {
				return false, c.streamError(ch.Error)
			}
			if resp.RequestID == "" && ch.ID != "" {
				resp.RequestID = ch.ID
			}
			if resp.Model == "" {
				resp.Model = ch.Model
			}
			for _, choice := range ch.Choices {
				if choice.FinishReason != nil && *choice.FinishReason != "" {
					resp.FinishReason = *choice.FinishReason
					sawFinish = true
				}
				for i, d := range choice.Delta.ToolCalls {
					tools.add(i, d)
				}
				text := ""
				if choice.Delta.Content != nil {
					text = *choice.Delta.Content
				} else if choice.Delta.Refusal != nil {
					text = *choice.Delta.Refusal
				}
				if text != "" {
					content.WriteString(text)
					if err := deliver(onDelta, text); err != nil {
						return false, err
					}
				}
			}
			if ch.Usage != nil {
				resp.Usage = ch.Usage.normalise()
				resp.UsageReported = true
			}
			return false, nil
		})
	if headerID != "" {
		resp.RequestID = headerID
	}
	resp.Content = content.String()
	// A server that closes the stream after the finish chunk without "data: [DONE]" (or whose usage
	// chunk was lost) still delivered a complete answer.
	if err != nil && sawFinish && errors.Is(err, ErrStreamIncomplete) && ctx.Err() == nil {
		err = nil
	}
	if err != nil {
		return resp, err
	}
	resp.ToolCalls = tools.result()
	return resp, nil
}

func (c *openAIClient) streamError(e *oaErrorBody) error {
	retryable := e.Type == "server_error" || e.Type == "rate_limit_error" || e.Type == "overloaded_error"
	return &ProviderError{Provider: c.id, Address: c.base, Type: e.Type, Message: e.Message, Retryable: retryable}
}

// argumentsOrEmpty is what is sent back for a tool call's arguments: the JSON object, "{}" if none.
func argumentsOrEmpty(a json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(a))) == 0 {
		return json.RawMessage("{}")
	}
	return a
}

// normaliseArguments makes a model's arguments safe to carry around as json.RawMessage: empty
// becomes {}, invalid JSON (a model that broke off mid-object) becomes a JSON string holding the
// raw text, so the tool executor can reject it with a clear message instead of a marshal failure.
func normaliseArguments(raw []byte) json.RawMessage {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	quoted, _ := json.Marshal(s)
	return quoted
}

// schemaOrEmpty gives a tool without parameters the empty object schema the providers require.
func schemaOrEmpty(s json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(s))) == 0 || string(s) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s
}
