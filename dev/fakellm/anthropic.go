package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// anthropicFormat serves POST /v1/messages like the Anthropic Messages API.
type anthropicFormat struct{}

func (anthropicFormat) name() string { return "anthropic" }

func (anthropicFormat) requestIDHeader() string { return "request-id" }

func (anthropicFormat) parse(r *http.Request, body []byte) (*conversation, error) {
	if r.Header.Get("anthropic-version") == "" {
		return nil, errors.New("anthropic-version: header is required")
	}
	var req struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("invalid request body: %v", err)
	}
	switch {
	case req.Model == "":
		return nil, errors.New("model: Field required")
	case req.MaxTokens <= 0:
		return nil, errors.New("max_tokens: Field required")
	case len(req.Messages) == 0:
		return nil, errors.New("messages: at least one message is required")
	}
	c := &conversation{format: "anthropic", model: req.Model, stream: req.Stream, includeUsage: true, maxTokens: req.MaxTokens}
	if sys := textOf(req.System); sys != "" {
		c.add(normMessage{Role: "system", Content: sys})
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			c.add(normMessage{Role: m.Role, Content: s})
			continue
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, fmt.Errorf("messages.%d.content: Input should be a valid list", i)
		}
		// Tool results become tool messages; text and tool_use stay in the role's message.
		nm := normMessage{Role: m.Role}
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text == "" {
					return nil, fmt.Errorf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
				}
				nm.Content += b.Text
			case "tool_use":
				if b.ID == "" || b.Name == "" {
					return nil, fmt.Errorf("messages.%d.content.%d: tool_use blocks need id and name", i, j)
				}
				nm.ToolCalls = append(nm.ToolCalls, normCall{Name: b.Name, Arguments: compactJSON(b.Input)})
			case "tool_result":
				if b.ToolUseID == "" {
					return nil, fmt.Errorf("messages.%d.content.%d.tool_use_id: Field required", i, j)
				}
				c.add(normMessage{Role: "tool", Content: textOf(b.Content), ToolCallID: b.ToolUseID})
			}
		}
		if nm.Content != "" || len(nm.ToolCalls) > 0 {
			c.add(nm)
		}
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, t.Name)
	}
	return c, nil
}

func (anthropicFormat) errorBody(status int, msg string) any {
	typ := "invalid_request_error"
	switch {
	case status == 401:
		typ = "authentication_error"
	case status == 403:
		typ = "permission_error"
	case status == 404:
		typ = "not_found_error"
	case status == 413:
		typ = "request_too_large"
	case status == 429:
		typ = "rate_limit_error"
	case status == 529:
		typ = "overloaded_error"
	case status >= 500:
		typ = "api_error"
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

// anUsage splits the normalised input count into Anthropic's disjoint counters.
func anUsage(u Usage) map[string]any {
	fresh := max(0, u.InputTokens-u.CachedInputTokens-u.CacheCreationTokens)
	return map[string]any{
		"input_tokens":                fresh,
		"cache_creation_input_tokens": u.CacheCreationTokens,
		"cache_read_input_tokens":     u.CachedInputTokens,
		"output_tokens":               u.OutputTokens,
	}
}

func anStopReason(a *answer) string {
	if len(a.toolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func (anthropicFormat) reply(w http.ResponseWriter, c *conversation, a *answer, seq int64) {
	content := []any{}
	if a.reply != "" {
		content = append(content, map[string]any{"type": "text", "text": a.reply})
	}
	for _, tc := range a.toolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": tc.Arguments})
	}
	body := map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", seq), "type": "message", "role": "assistant", "model": c.model,
		"content": content, "stop_reason": anStopReason(a), "stop_sequence": nil,
	}
	if !a.rule.OmitUsage {
		body["usage"] = anUsage(a.usage)
	}
	writeJSON(w, http.StatusOK, body)
}

func (anthropicFormat) stream(e *eventWriter, c *conversation, a *answer, seq int64) bool {
	e.w.Header().Set("Content-Type", "text/event-stream")
	e.w.Header().Set("Cache-Control", "no-cache")
	e.w.WriteHeader(http.StatusOK)
	msg := map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", seq), "type": "message", "role": "assistant", "content": []any{},
		"model": c.model, "stop_reason": nil, "stop_sequence": nil,
	}
	if !a.rule.OmitUsage {
		u := anUsage(a.usage)
		u["output_tokens"] = 1 // the real API reports a placeholder here and the total in message_delta
		msg["usage"] = u
	}
	if !e.write(evFrame, sse("message_start", map[string]any{"type": "message_start", "message": msg})) {
		return false
	}
	index := 0
	if a.reply != "" {
		if !e.write(evFrame, sse("content_block_start", map[string]any{
			"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""},
		})) {
			return false
		}
		if !e.write(evFrame, sse("ping", map[string]any{"type": "ping"})) {
			return false
		}
		for _, piece := range splitChunks(a.reply, a.chunks) {
			if !e.write(evContent, sse("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": piece},
			})) {
				return false
			}
		}
		if !e.write(evFrame, sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})) {
			return false
		}
		index++
	}
	for _, tc := range a.toolCalls {
		if !e.write(evContent, sse("content_block_start", map[string]any{
			"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}},
		})) {
			return false
		}
		for _, piece := range splitChunks(string(tc.Arguments), 2) {
			if !e.write(evContent, sse("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece},
			})) {
				return false
			}
		}
		if !e.write(evFrame, sse("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})) {
			return false
		}
		index++
	}
	delta := map[string]any{
		"type": "message_delta", "delta": map[string]any{"stop_reason": anStopReason(a), "stop_sequence": nil},
	}
	if !a.rule.OmitUsage {
		delta["usage"] = map[string]any{"output_tokens": a.usage.OutputTokens}
	}
	if !e.write(evFinal, sse("message_delta", delta)) {
		return false
	}
	return e.write(evFinal, sse("message_stop", map[string]any{"type": "message_stop"}))
}
