package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// anthropicVersion is the API version header the Messages API requires.
const anthropicVersion = "2023-06-01"

// anthropicClient speaks the Anthropic Messages API: POST {base}/v1/messages.
type anthropicClient struct{ *httpBase }

type anCacheControl struct {
	Type string `json:"type"`
}

type anBlock struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`

	CacheControl *anCacheControl `json:"cache_control,omitempty"`
}

type anMessage struct {
	Role    string    `json:"role"`
	Content []anBlock `json:"content"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anRequest struct {
	Model       string      `json:"model"`
	MaxTokens   int         `json:"max_tokens"`
	System      any         `json:"system,omitempty"` // string, or blocks when caching
	Messages    []anMessage `json:"messages"`
	Tools       []anTool    `json:"tools,omitempty"`
	ToolChoice  any         `json:"tool_choice,omitempty"`
	Temperature *float64    `json:"temperature,omitempty"`
	Stream      bool        `json:"stream,omitempty"`
}

type anUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// merge copies the counters present in o (message_delta repeats or completes message_start's).
func (u *anUsage) merge(o *anUsage) {
	if o == nil {
		return
	}
	if o.InputTokens != nil {
		u.InputTokens = o.InputTokens
	}
	if o.OutputTokens != nil {
		u.OutputTokens = o.OutputTokens
	}
	if o.CacheCreationInputTokens != nil {
		u.CacheCreationInputTokens = o.CacheCreationInputTokens
	}
	if o.CacheReadInputTokens != nil {
		u.CacheReadInputTokens = o.CacheReadInputTokens
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// normalise sums Anthropic's disjoint input counters into InputTokens (see Usage).
func (u *anUsage) normalise() Usage {
	read, created := deref(u.CacheReadInputTokens), deref(u.CacheCreationInputTokens)
	return Usage{
		InputTokens:         deref(u.InputTokens) + read + created,
		OutputTokens:        deref(u.OutputTokens),
		CachedInputTokens:   read,
		CacheCreationTokens: created,
	}
}

type anContent struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anResponse struct {
	ID         string      `json:"id"`
	Model      string      `json:"model"`
	StopReason string      `json:"stop_reason"`
	Content    []anContent `json:"content"`
	Usage      *anUsage    `json:"usage"`
}

type anErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type anEvent struct {
	Type    string       `json:"type"`
	Message *anResponse  `json:"message"`
	Index   int          `json:"index"`
	Block   *anContent   `json:"content_block"`
	Usage   *anUsage     `json:"usage"`
	Error   *anErrorBody `json:"error"`
	Delta   struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
}

func (c *anthropicClient) setAuth(h http.Header) {
	if c.apiKey != "" {
		h.Set("x-api-key", c.apiKey)
	}
	h.Set("anthropic-version", anthropicVersion)
}

func (c *anthropicClient) buildRequest(req Request, stream bool) anRequest {
	out := anRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stream: stream}
	if out.MaxTokens <= 0 {
		out.MaxTokens = DefaultAnthropicMaxTokens
	}
	var system []string
	add := func(role string, blocks ...anBlock) {
		if len(blocks) == 0 {
			return
		}
		// The API wants user and assistant turns to alternate, and all tool results of a turn in one
		// user message: consecutive messages of one role are merged.
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			return
		}
		out.Messages = append(out.Messages, anMessage{Role: role, Content: blocks})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			if m.Content != "" {
				system = append(system, m.Content)
			}
		case RoleAssistant:
			var blocks []anBlock
			if m.Content != "" { // the API rejects empty text blocks
				blocks = append(blocks, anBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: argumentsOrEmpty(tc.Arguments)})
			}
			add("assistant", blocks...)
		case RoleTool:
			add("user", anBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content})
		default:
			if m.Content != "" {
				add("user", anBlock{Type: "text", Text: m.Content})
			}
		}
	}
	if len(system) > 0 {
		text := strings.Join(system, "\n\n")
		if req.PromptCaching {
			out.System = []anBlock{{Type: "text", Text: text, CacheControl: &anCacheControl{Type: "ephemeral"}}}
		} else {
			out.System = text
		}
	}
	if out.Messages == nil {
		out.Messages = []anMessage{}
	}
	if len(req.Tools) > 0 {
		for _, t := range req.Tools {
			out.Tools = append(out.Tools, anTool{Name: t.Name, Description: t.Description, InputSchema: schemaOrEmpty(t.Parameters)})
		}
		switch req.ToolChoice {
		case "":
		case ToolChoiceAuto:
			out.ToolChoice = map[string]string{"type": "auto"}
		case ToolChoiceNone:
			out.ToolChoice = map[string]string{"type": "none"}
		case ToolChoiceRequired:
			out.ToolChoice = map[string]string{"type": "any"}
		default:
			out.ToolChoice = map[string]string{"type": "tool", "name": req.ToolChoice}
		}
	}
	return out
}

func (c *anthropicClient) Chat(ctx context.Context, req Request) (*Response, error) {
	actx, cancel := c.withTimeout(ctx)
	defer cancel()
	hresp, err := c.post(actx, "/v1/messages", c.buildRequest(req, false), c.setAuth)
	if err != nil {
		return nil, err
	}
	var body anResponse
	if err := c.decodeJSON(actx, hresp, &body); err != nil {
		return nil, err
	}
	resp := &Response{RequestID: requestID(hresp.Header, "request-id", body.ID), Model: body.Model, FinishReason: body.StopReason}
	var text strings.Builder
	for _, b := range body.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: normaliseArguments(b.Input)})
		}
	}
	resp.Content = text.String()
	if body.Usage != nil {
		resp.Usage = body.Usage.normalise()
		resp.UsageReported = true
	}
	return resp, nil
}

func (c *anthropicClient) Stream(ctx context.Context, req Request, onDelta func(string) error) (*Response, error) {
	resp := &Response{}
	var content strings.Builder
	var usage anUsage
	type toolBuild struct {
		id, name string
		start    json.RawMessage
		args     strings.Builder
	}
	var tools []*toolBuild
	byIndex := map[int]*toolBuild{}
	var sawDelta bool
	var headerID string
	err := c.streamAttempt(ctx, "/v1/messages", c.buildRequest(req, true), c.setAuth,
		func(h http.Header) { headerID = h.Get("request-id") },
		func(line []byte) (bool, error) {
			data, ok := sseData(line)
			if !ok || len(data) == 0 {
				return false, nil
			}
			var ev anEvent
			if err := json.Unmarshal(data, &ev); err != nil {
				return false, &ProviderError{Provider: c.id, Address: c.base, Message: "unreadable stream event: " + err.Error(), Err: err}
			}
			switch ev.Type {
			case "message_start":
				if ev.Message != nil {
					resp.RequestID, resp.Model = ev.Message.ID, ev.Message.Model
					usage.merge(ev.Message.Usage)
				}
			case "content_block_start":
				if ev.Block == nil {
					break
				}
				switch ev.Block.Type {
				case "tool_use":
					tb := &toolBuild{id: ev.Block.ID, name: ev.Block.Name, start: ev.Block.Input}
					tools = append(tools, tb)
					byIndex[ev.Index] = tb
				case "text":
					content.WriteString(ev.Block.Text)
					if err := deliver(onDelta, ev.Block.Text); err != nil {
						return false, err
					}
				}
			case "content_block_delta":
				switch ev.Delta.Type {
				case "text_delta":
					content.WriteString(ev.Delta.Text)
					if err := deliver(onDelta, ev.Delta.Text); err != nil {
						return false, err
					}
				case "input_json_delta":
					if tb := byIndex[ev.Index]; tb != nil {
						tb.args.WriteString(ev.Delta.PartialJSON)
					}
				}
			case "message_delta":
				sawDelta = true
				if ev.Delta.StopReason != "" {
					resp.FinishReason = ev.Delta.StopReason
				}
				if ev.Usage != nil {
					usage.merge(ev.Usage)
					resp.UsageReported = true
				}
			case "message_stop":
				return true, nil
			case "error":
				if ev.Error != nil {
					t := ev.Error.Type
					return false, &ProviderError{Provider: c.id, Address: c.base, Type: t, Message: ev.Error.Message,
						Retryable: t == "overloaded_error" || t == "api_error" || t == "rate_limit_error"}
				}
			}
			return false, nil
		})
	if headerID != "" {
		resp.RequestID = headerID
	}
	resp.Content = content.String()
	resp.Usage = usage.normalise()
	// message_delta carries the stop reason and final usage; losing only message_stop loses nothing.
	if err != nil && sawDelta && errors.Is(err, ErrStreamIncomplete) && ctx.Err() == nil {
		err = nil
	}
	if err != nil {
		return resp, err
	}
	for _, tb := range tools {
		args := []byte(tb.args.String())
		if len(args) == 0 {
			args = tb.start
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: tb.id, Name: tb.name, Arguments: normaliseArguments(args)})
	}
	return resp, nil
}
