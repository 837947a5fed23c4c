package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ollamaFormat serves POST /api/chat like Ollama.
type ollamaFormat struct{}

func (ollamaFormat) name() string { return "ollama" }

func (ollamaFormat) requestIDHeader() string { return "" }

func (ollamaFormat) parse(_ *http.Request, body []byte) (*conversation, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolName   string `json:"tool_name"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Stream  *bool `json:"stream"`
		Options struct {
			NumPredict int `json:"num_predict"`
		} `json:"options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("invalid character in request: %v", err)
	}
	if req.Model == "" {
		return nil, errors.New("model is required")
	}
	// Ollama streams unless told otherwise.
	c := &conversation{format: "ollama", model: req.Model, stream: req.Stream == nil || *req.Stream, includeUsage: true, maxTokens: req.Options.NumPredict}
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, fmt.Errorf("invalid role: %s", m.Role)
		}
		nm := normMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			if len(tc.Function.Arguments) > 0 && tc.Function.Arguments[0] != '{' {
				return nil, errors.New("json: cannot unmarshal tool call arguments into an object")
			}
			nm.ToolCalls = append(nm.ToolCalls, normCall{Name: tc.Function.Name, Arguments: compactJSON(tc.Function.Arguments)})
		}
		c.add(nm)
	}
	for _, t := range req.Tools {
		c.tools = append(c.tools, t.Function.Name)
	}
	return c, nil
}

func (ollamaFormat) errorBody(_ int, msg string) any { return map[string]any{"error": msg} }

func olToolCalls(calls []ToolCall) []any {
	out := make([]any, 0, len(calls))
	for i, tc := range calls {
		out = append(out, map[string]any{"function": map[string]any{"index": i, "name": tc.Name, "arguments": tc.Arguments}})
	}
	return out
}

func olDone(c *conversation, a *answer, msg map[string]any) map[string]any {
	reason := "stop"
	body := map[string]any{
		"model": c.model, "created_at": time.Now().UTC().Format(time.RFC3339Nano), "message": msg,
		"done": true, "done_reason": reason,
		"total_duration": 5_000_000, "load_duration": 1_000_000,
	}
	if !a.rule.OmitUsage {
		body["prompt_eval_count"] = a.usage.InputTokens
		body["prompt_eval_duration"] = 1_000_000
		body["eval_count"] = a.usage.OutputTokens
		body["eval_duration"] = 3_000_000
	}
	return body
}

func (ollamaFormat) reply(w http.ResponseWriter, c *conversation, a *answer, _ int64) {
	msg := map[string]any{"role": "assistant", "content": a.reply}
	if len(a.toolCalls) > 0 {
		msg["tool_calls"] = olToolCalls(a.toolCalls)
	}
	writeJSON(w, http.StatusOK, olDone(c, a, msg))
}

func (ollamaFormat) stream(e *eventWriter, c *conversation, a *answer, _ int64) bool {
	e.w.Header().Set("Content-Type", "application/x-ndjson")
	e.w.WriteHeader(http.StatusOK)
	line := func(msg map[string]any) []byte {
		return ndjson(map[string]any{
			"model": c.model, "created_at": time.Now().UTC().Format(time.RFC3339Nano), "message": msg, "done": false,
		})
	}
	for _, piece := range splitChunks(a.reply, a.chunks) {
		if !e.write(evContent, line(map[string]any{"role": "assistant", "content": piece})) {
			return false
		}
	}
	if len(a.toolCalls) > 0 {
		// Ollama sends tool calls whole, in one message.
		if !e.write(evContent, line(map[string]any{"role": "assistant", "content": "", "tool_calls": olToolCalls(a.toolCalls)})) {
			return false
		}
	}
	return e.write(evFinal, ndjson(olDone(c, a, map[string]any{"role": "assistant", "content": ""})))
}
