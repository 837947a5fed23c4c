package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// openAIFormat serves POST /v1/chat/completions like the OpenAI API.
type openAIFormat struct{}

func (openAIFormat) name() string { return "openai" }

func (openAIFormat) requestIDHeader() string { return "x-request-id" }

func (openAIFormat) parse(_ *http.Request, body []byte) (*conversation, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		MaxTokens           int `json:"max_tokens"`
		MaxCompletionTokens int `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("We could not parse the JSON body of your request. (%v)", err)
	}
	if req.Model == "" {
		return nil, errors.New("you must provide a model parameter")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("[] is too short - 'messages'")
	}
	c := &conversation{format: "openai", model: req.Model, stream: req.Stream, maxTokens: max(req.MaxTokens, req.MaxCompletionTokens)}
	c.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, fmt.Errorf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'. (messages[%d].role)", m.Role, i)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return nil, fmt.Errorf("Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'. (messages[%d])", i)
		}
		nm := normMessage{Role: m.Role, Content: textOf(m.Content), ToolCallID: m.ToolCallID}
		if nm.Role == "developer" {
			nm.Role = "system"
		}
		for _, tc := range m.ToolCalls {
			nm.ToolCalls = append(nm.ToolCalls, normCall{Name: tc.Function.Name, Arguments: compactJSON(tc.Function.Arguments)})
		}
		c.add(nm)
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, t.Function.Name)
	}
	return c, nil
}

func (openAIFormat) errorBody(status int, msg string) any {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == 401:
		code = "invalid_api_key"
	case status == 404:
		code = "model_not_found"
	case status == 429:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
}

func oaUsage(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":     u.InputTokens,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      u.InputTokens + u.OutputTokens,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": u.CachedInputTokens, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": u.ReasoningTokens, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
}

func oaToolCalls(calls []ToolCall) []map[string]any {
	out := make([]map[string]any, 0, len(calls))
	for _, tc := range calls {
		out = append(out, map[string]any{
			"id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": string(tc.Arguments)},
		})
	}
	return out
}

func (openAIFormat) reply(w http.ResponseWriter, c *conversation, a *answer, seq int64) {
	msg := map[string]any{"role": "assistant", "content": a.reply, "refusal": nil, "annotations": []any{}}
	if len(a.toolCalls) > 0 {
		msg["tool_calls"] = oaToolCalls(a.toolCalls)
		if a.reply == "" {
			msg["content"] = nil
		}
	}
	body := map[string]any{
		"id": fmt.Sprintf("chatcmpl-fake-%d", seq), "object": "chat.completion",
		"created": time.Now().Unix(), "model": c.model,
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": a.finishReason(),
		}},
		"service_tier": "default", "system_fingerprint": "fp_fake",
	}
	if !a.rule.OmitUsage {
		body["usage"] = oaUsage(a.usage)
	}
	writeJSON(w, http.StatusOK, body)
}

func (openAIFormat) stream(e *eventWriter, c *conversation, a *answer, seq int64) bool {
	e.w.Header().Set("Content-Type", "text/event-stream")
	e.w.Header().Set("Cache-Control", "no-cache")
	e.w.WriteHeader(http.StatusOK)
	id, created := fmt.Sprintf("chatcmpl-fake-%d", seq), time.Now().Unix()
	chunk := func(delta map[string]any, finish any) []byte {
		m := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": c.model,
			"system_fingerprint": "fp_fake",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
		if c.includeUsage {
			m["usage"] = nil // OpenAI sends "usage": null on every chunk but the last when asked for usage
		}
		return sse("", m)
	}
	if !e.write(evFrame, chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)) {
		return false
	}
	for _, piece := range splitChunks(a.reply, a.chunks) {
		if !e.write(evContent, chunk(map[string]any{"content": piece}, nil)) {
			return false
		}
	}
	for i, tc := range a.toolCalls {
		head := map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}
		if !e.write(evContent, chunk(head, nil)) {
			return false
		}
		for _, piece := range splitChunks(string(tc.Arguments), 2) {
			part := map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece},
			}}}
			if !e.write(evContent, chunk(part, nil)) {
				return false
			}
		}
	}
	if !e.write(evFinal, chunk(map[string]any{}, a.finishReason())) {
		return false
	}
	if c.includeUsage && !a.rule.OmitUsage {
		usage := sse("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": c.model,
			"system_fingerprint": "fp_fake", "choices": []any{}, "usage": oaUsage(a.usage),
		})
		if !e.write(evFinal, usage) {
			return false
		}
	}
	return e.write(evFinal, []byte("data: [DONE]\n\n"))
}
