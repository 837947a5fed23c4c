package llm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
)

// ollamaClient speaks Ollama's native chat API: POST {base}/api/chat, NDJSON when streaming.
type ollamaClient struct{ *httpBase }

type olToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type olMessage struct {
	Role       string       `json:"role"`
	Content    string       `json:"content"`
	ToolCalls  []olToolCall `json:"tool_calls,omitempty"`
	ToolName   string       `json:"tool_name,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type olOptions struct {
	Temperature *float64 `json:"temperature,omitempty"`
	NumPredict  int      `json:"num_predict,omitempty"`
}

type olRequest struct {
	Model    string      `json:"model"`
	Messages []olMessage `json:"messages"`
	Tools    []oaTool    `json:"tools,omitempty"` // same shape as OpenAI's
	Stream   bool        `json:"stream"`          // always sent: Ollama streams when it is absent
	Options  *olOptions  `json:"options,omitempty"`
}

type olResponse struct {
	Model   string `json:"model"`
	Message struct {
		Content   string       `json:"content"`
		ToolCalls []olToolCall `json:"tool_calls"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount *int64 `json:"prompt_eval_count"`
	EvalCount       *int64 `json:"eval_count"`
	Error           string `json:"error"`
}

// usage reads the counters of the done message. Ollama leaves prompt_eval_count out when the whole
// prompt came from its cache; usage is then not reported, so governance estimates instead of
// recording zero input tokens.
func (r *olResponse) usage() (Usage, bool) {
	u := Usage{InputTokens: deref(r.PromptEvalCount), OutputTokens: deref(r.EvalCount)}
	return u, r.PromptEvalCount != nil && r.EvalCount != nil
}

func (c *ollamaClient) setAuth(h http.Header) {
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
}

func (c *ollamaClient) buildRequest(req Request, stream bool) olRequest {
	out := olRequest{Model: req.Model, Stream: stream}
	if req.Temperature != nil || req.MaxTokens > 0 {
		out.Options = &olOptions{Temperature: req.Temperature, NumPredict: req.MaxTokens}
	}
	out.Messages = make([]olMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		om := olMessage{Role: m.Role, Content: m.Content}
		if m.Role == RoleTool {
			om.ToolName, om.ToolCallID = m.Name, m.ToolCallID
		}
		for _, tc := range m.ToolCalls {
			otc := olToolCall{ID: tc.ID}
			otc.Function.Name = tc.Name
			otc.Function.Arguments = argumentsObject(tc.Arguments)
			om.ToolCalls = append(om.ToolCalls, otc)
		}
		out.Messages = append(out.Messages, om)
	}
	// Ollama has no tool_choice; "none" is honoured by not offering the tools.
	if len(req.Tools) > 0 && req.ToolChoice != ToolChoiceNone {
		for _, t := range req.Tools {
			ot := oaTool{Type: "function"}
			ot.Function.Name = t.Name
			ot.Function.Description = t.Description
			ot.Function.Parameters = schemaOrEmpty(t.Parameters)
			out.Tools = append(out.Tools, ot)
		}
	}
	return out
}

func (c *ollamaClient) Chat(ctx context.Context, req Request) (*Response, error) {
	actx, cancel := c.withTimeout(ctx)
	defer cancel()
	hresp, err := c.post(actx, "/api/chat", c.buildRequest(req, false), c.setAuth)
	if err != nil {
		return nil, err
	}
	var body olResponse
	if err := c.decodeJSON(actx, hresp, &body); err != nil {
		return nil, err
	}
	if body.Error != "" {
		return nil, &ProviderError{Provider: c.id, Address: c.base, Message: body.Error}
	}
	resp := &Response{Model: body.Model, Content: body.Message.Content, FinishReason: body.DoneReason}
	resp.ToolCalls = c.toolCalls(nil, body.Message.ToolCalls)
	resp.Usage, resp.UsageReported = body.usage()
	return resp, nil
}

func (c *ollamaClient) Stream(ctx context.Context, req Request, onDelta func(string) error) (*Response, error) {
	resp := &Response{}
	var content strings.Builder
	var calls []ToolCall
	err := c.streamAttempt(ctx, "/api/chat", c.buildRequest(req, true), c.setAuth, nil,
		func(line []byte) (bool, error) {
			if len(strings.TrimSpace(string(line))) == 0 {
				return false, nil
			}
			var ch olResponse
			if err := json.Unmarshal(line, &ch); err != nil {
				return false, &ProviderError{Provider: c.id, Address: c.base, Message: "unreadable stream line: " + err.Error(), Err: err}
			}
			if ch.Error != "" {
				return false, &ProviderError{Provider: c.id, Address: c.base, Message: ch.Error}
			}
			if resp.Model == "" {
				resp.Model = ch.Model
			}
			calls = c.toolCalls(calls, ch.Message.ToolCalls)
			if t := ch.Message.Content; t != "" {
				content.WriteString(t)
				if err := deliver(onDelta, t); err != nil {
					return false, err
				}
			}
			if ch.Done {
				resp.FinishReason = ch.DoneReason
				resp.Usage, resp.UsageReported = ch.usage()
				return true, nil
			}
			return false, nil
		})
	resp.Content = content.String()
	if err != nil {
		return resp, err
	}
	resp.ToolCalls = calls
	return resp, nil
}

// toolCalls appends Ollama's tool calls to dst. Ollama sends each call whole; older versions send
// no id, so one is made up for the agent loop to pair the call with its result.
func (c *ollamaClient) toolCalls(dst []ToolCall, in []olToolCall) []ToolCall {
	for _, tc := range in {
		id := tc.ID
		if id == "" {
			id = newCallID()
		}
		dst = append(dst, ToolCall{ID: id, Name: tc.Function.Name, Arguments: normaliseArguments(tc.Function.Arguments)})
	}
	return dst
}

func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// argumentsObject is what Ollama accepts as arguments: a JSON object only.
func argumentsObject(a json.RawMessage) json.RawMessage {
	s := strings.TrimSpace(string(a))
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}
