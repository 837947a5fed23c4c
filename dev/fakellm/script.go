package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Rule scripts one kind of answer. Rules are tried in order; the first whose matchers all hold and
// whose Times is not used up answers the call. Matchers left empty match everything.
//
// The action is the combination of the fields set: Status >= 400 answers with an error (Message or
// Body, Retry-After and Headers); otherwise Reply and/or ToolCalls are sent (Reply empty and no tool
// calls: the default echo), Delay waits before answering, Cut/CutAfterChunks break a stream, Usage
// replaces the estimated usage and OmitUsage leaves usage out.
type Rule struct {
	// Model matches the request's model exactly.
	Model string `json:"model,omitempty"`
	// Contains matches a substring of the last user or tool message (whichever came last).
	Contains string `json:"contains,omitempty"`
	// Format matches the wire format: openai, anthropic or ollama.
	Format string `json:"format,omitempty"`
	// Times is how many calls the rule answers; 0 means every call.
	Times int `json:"times,omitempty"`

	Reply     string     `json:"reply,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	// Status >= 400 makes the answer an error with that HTTP status.
	Status int `json:"status,omitempty"`
	// Message is the error message placed in the format's own error body.
	Message string `json:"message,omitempty"`
	// Body, when set, is sent verbatim as the error body instead.
	Body string `json:"body,omitempty"`
	// RetryAfter is sent as the Retry-After header (seconds or an HTTP date).
	RetryAfter string `json:"retry_after,omitempty"`
	// Headers are added to the response (error or not).
	Headers map[string]string `json:"headers,omitempty"`
	// EchoAuth makes an error's message repeat the request's credentials
	// (its Authorization and x-api-key headers) after Message, as some
	// providers' 401 answers do: the gateway must not pass them on.
	EchoAuth bool `json:"echo_auth,omitempty"`

	// Delay waits before answering (the client's cancellation ends the wait).
	Delay Duration `json:"delay,omitempty"`
	// ChunkDelay waits after each streamed content chunk.
	ChunkDelay Duration `json:"chunk_delay,omitempty"`
	// Chunks is how many pieces the reply text is streamed in (default 4, at most one per rune).
	Chunks int `json:"chunks,omitempty"`
	// Cut closes a stream's connection abruptly after CutAfterChunks content chunks, before the final
	// and usage events. A non-streaming call with Cut gets its connection closed without an answer.
	Cut bool `json:"cut,omitempty"`
	// CutAfterChunks > 0 implies Cut.
	CutAfterChunks int `json:"cut_after_chunks,omitempty"`

	// Usage replaces the estimated usage.
	Usage *Usage `json:"usage,omitempty"`
	// OmitUsage leaves the usage out of the answer (no usage chunk, no counters).
	OmitUsage bool `json:"omit_usage,omitempty"`
}

// ToolCall is a tool call the fake model makes.
type ToolCall struct {
	// ID is optional; the fake makes one up.
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// NewToolCall builds a ToolCall whose arguments are args encoded as JSON, e.g.
// NewToolCall("write_file", map[string]string{"path": "report.md", "content": "# Report"}).
func NewToolCall(name string, args any) ToolCall {
	raw, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("fakellm: tool call arguments: %v", err))
	}
	return ToolCall{Name: name, Arguments: raw}
}

// Usage is the token usage the fake reports, in the gateway's normalised terms: InputTokens counts
// all prompt tokens including CachedInputTokens and CacheCreationTokens, OutputTokens includes
// ReasoningTokens. Each wire format receives it in its own shape (Anthropic's input_tokens excludes
// the cache counters).
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CachedInputTokens   int64 `json:"cached_input_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
	ReasoningTokens     int64 `json:"reasoning_tokens,omitempty"`
}

// Duration is a time.Duration that reads "200ms" or a number of milliseconds from JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration: want \"200ms\" or milliseconds: %w", err)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

func (r Rule) matches(c *conversation) bool {
	if r.Model != "" && r.Model != c.model {
		return false
	}
	if r.Format != "" && !strings.EqualFold(r.Format, c.format) {
		return false
	}
	return r.Contains == "" || strings.Contains(c.lastText, r.Contains)
}

// Behaviours a model name can carry without a script, for load and failure tests.
var (
	modelSlow = regexp.MustCompile(`(?:^|[^a-z0-9])slow-([0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m))`)
	modelFail = regexp.MustCompile(`(?:^|[^a-z0-9])fail-([0-9]{3})`)
	modelCut  = regexp.MustCompile(`(?:^|[^a-z0-9])cut-([0-9]+)`)
)

// ruleFromModel reads behaviours from a model name: "slow-200ms" answers after 200 ms, "fail-503"
// answers with that status, "cut-2" cuts streams after 2 chunks; they combine ("slow-1s-cut-2").
func ruleFromModel(model string) Rule {
	var r Rule
	m := strings.ToLower(model)
	if g := modelSlow.FindStringSubmatch(m); g != nil {
		if d, err := time.ParseDuration(g[1]); err == nil {
			r.Delay = Duration(d)
		}
	}
	if g := modelFail.FindStringSubmatch(m); g != nil {
		r.Status, _ = strconv.Atoi(g[1])
	}
	if g := modelCut.FindStringSubmatch(m); g != nil {
		r.CutAfterChunks, _ = strconv.Atoi(g[1])
		r.Cut = true
	}
	return r
}

// answer is what the fake will send for one call, whatever the wire format.
type answer struct {
	rule      Rule
	reply     string
	toolCalls []ToolCall
	usage     Usage
	chunks    int
}

func (a *answer) cut() bool { return a.rule.Cut || a.rule.CutAfterChunks > 0 }

func (a *answer) finishReason() string {
	if len(a.toolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// plan turns a rule (possibly empty) into the answer for conversation c.
func plan(r Rule, c *conversation, seq int64) *answer {
	a := &answer{rule: r, reply: r.Reply, chunks: r.Chunks}
	for i, tc := range r.ToolCalls {
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_fake_%d_%d", seq, i)
		}
		if len(bytes.TrimSpace(tc.Arguments)) == 0 {
			tc.Arguments = json.RawMessage("{}")
		}
		a.toolCalls = append(a.toolCalls, tc)
	}
	if a.reply == "" && len(a.toolCalls) == 0 {
		a.reply = "echo: " + c.lastUser
	}
	if a.chunks <= 0 {
		a.chunks = 4
	}
	if r.Usage != nil {
		a.usage = *r.Usage
	} else {
		out := len(a.reply)
		for _, tc := range a.toolCalls {
			out += len(tc.Name) + len(tc.Arguments)
		}
		a.usage = Usage{InputTokens: max(1, int64(c.textLen/4)), OutputTokens: max(1, int64(out/4))}
	}
	return a
}

// splitChunks cuts s into at most n pieces of similar length, never inside a UTF-8 sequence.
func splitChunks(s string, n int) []string {
	runes := []rune(s)
	if len(runes) == 0 {
		return nil
	}
	n = max(1, min(n, len(runes)))
	out := make([]string, 0, n)
	size := (len(runes) + n - 1) / n
	for i := 0; i < len(runes); i += size {
		out = append(out, string(runes[i:min(i+size, len(runes))]))
	}
	return out
}
