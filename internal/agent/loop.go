package agent

import (
	"encoding/json"
	"fmt"

	"github.com/agentryhq/agentry/internal/llm"

	"github.com/agentryhq/agentry/internal/textcut"
)

// Executor performs the two kinds of step of the agent loop. Chat passes an
// in-process executor; the TaskRun workflow passes one whose methods run
// activities, so each step is durable. Executors hold their own context:
// the loop has none, which keeps it usable from workflow code.
type Executor interface {
	CallLLM(turn TurnRequest) (*llm.Response, error)
	CallTool(inv ToolInvocation) (ToolResult, error)
}

// TurnRequest is one LLM call of the loop.
type TurnRequest struct {
	Turn     int    `json:"turn"`
	Provider string `json:"provider"`
	Request  llm.Request
}

// ToolInvocation is one tool call of the loop.
type ToolInvocation struct {
	Turn int `json:"turn"`
	// Index is the call's place among the calls of its turn.
	Index int          `json:"index"`
	Call  llm.ToolCall `json:"call"`
}

// ToolResult is what a tool returned; errors are results too (the model
// sees them and can react), only executor failures stop the loop.
type ToolResult struct {
	Content string         `json:"content"`
	IsError bool           `json:"is_error,omitempty"`
	Files   []ProducedFile `json:"files,omitempty"`
}

// ProducedFile is a file written by a tool call.
type ProducedFile struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	Tool      string `json:"tool"`
}

// Input is one run of an agent.
type Input struct {
	Provider     string
	Model        string
	SystemPrompt string
	// History is the earlier conversation (no system message).
	History     []llm.Message
	UserText    string
	Tools       []llm.Tool
	ToolChoice  string
	Temperature *float64
	MaxTokens   int
	MaxTurns    int
	// PromptCaching asks for provider cache controls.
	PromptCaching bool
}

// Stop reasons.
const (
	StopFinished = "finished"
	// StopMaxTurns: the model still asked for tools when max_turns ran out;
	// the reply is the last text it wrote.
	StopMaxTurns = "max_turns"
)

// Output is the result of a run.
type Output struct {
	Reply string `json:"reply"`
	// NewMessages are the messages this run added to the conversation (the
	// user message, assistant turns, tool results), to be stored.
	NewMessages []llm.Message  `json:"new_messages"`
	Usage       llm.Usage      `json:"usage"`
	Files       []ProducedFile `json:"files,omitempty"`
	Turns       int            `json:"turns"`
	StopReason  string         `json:"stop_reason"`
}

// Checkpoint is where a run stands before one of its turns: everything
// the loop needs to go on from there (a workflow continues as new with
// it). Output.NewMessages is left out: it is the tail of Messages.
type Checkpoint struct {
	// Turn is the turn about to run.
	Turn int `json:"turn"`
	// Messages is the conversation as the loop holds it (durable runs hold
	// short stand-ins; the full messages are in the run log).
	Messages []llm.Message `json:"messages"`
	Output   Output        `json:"output"`
}

// Pauser may be implemented by an Executor that wants to stop a run
// between turns (continue-as-new, a history limit): BeforeTurn is called
// before every turn but the first one a Resume runs; a non-nil error stops
// the loop and is returned as it is.
type Pauser interface {
	BeforeTurn(cp Checkpoint) error
}

// Run drives the loop: system prompt + history + user message, then LLM
// turns and tool calls until the model answers without tools or MaxTurns
// LLM calls were made. It must stay deterministic (no clocks, randomness,
// goroutines or map iteration): workflows replay it.
//
// ToolChoice applies to the first turn only; later turns use auto, since a
// forced tool call on every turn could never finish.
func Run(exec Executor, in Input) (*Output, error) { return Resume(exec, in, nil) }

// Resume is Run from a checkpoint (nil: from the start).
func Resume(exec Executor, in Input, from *Checkpoint) (*Output, error) {
	maxTurns := in.MaxTurns
	if maxTurns <= 0 {
		maxTurns = 1
	}
	prefix := len(in.History)
	if in.SystemPrompt != "" {
		prefix++
	}
	var msgs []llm.Message
	var out *Output
	first := 1
	if from == nil {
		msgs = make([]llm.Message, 0, prefix+4)
		if in.SystemPrompt != "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: in.SystemPrompt})
		}
		msgs = append(msgs, in.History...)
		user := llm.Message{Role: llm.RoleUser, Content: in.UserText}
		msgs = append(msgs, user)
		out = &Output{NewMessages: []llm.Message{user}}
	} else {
		msgs = append([]llm.Message(nil), from.Messages...)
		o := from.Output
		out = &o
		if prefix <= len(msgs) {
			out.NewMessages = append([]llm.Message(nil), msgs[prefix:]...)
		}
		first = from.Turn
	}
	pauser, _ := exec.(Pauser)
	for turn := first; turn <= maxTurns; turn++ {
		if pauser != nil && turn != first {
			cp := Checkpoint{Turn: turn, Messages: msgs, Output: *out}
			cp.Output.NewMessages = nil
			if err := pauser.BeforeTurn(cp); err != nil {
				return out, err
			}
		}
		choice := ""
		if turn == 1 {
			choice = in.ToolChoice
		}
		req := llm.Request{
			Model: in.Model, Messages: append([]llm.Message(nil), msgs...), Tools: in.Tools,
			ToolChoice: choice, Temperature: in.Temperature, MaxTokens: in.MaxTokens, PromptCaching: in.PromptCaching,
		}
		resp, err := exec.CallLLM(TurnRequest{Turn: turn, Provider: in.Provider, Request: req})
		if err != nil {
			return out, fmt.Errorf("turn %d: %w", turn, err)
		}
		out.Turns = turn
		out.Usage = out.Usage.Add(resp.Usage)
		assistant := llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls}
		msgs = append(msgs, assistant)
		out.NewMessages = append(out.NewMessages, assistant)
		if resp.Content != "" {
			out.Reply = resp.Content
		}
		if len(resp.ToolCalls) == 0 {
			out.StopReason = StopFinished
			return out, nil
		}
		if turn == maxTurns {
			break
		}
		for i, call := range resp.ToolCalls {
			res, err := exec.CallTool(ToolInvocation{Turn: turn, Index: i, Call: call})
			if err != nil {
				return out, fmt.Errorf("turn %d: tool %s: %w", turn, call.Name, err)
			}
			out.Files = append(out.Files, res.Files...)
			toolMsg := llm.Message{Role: llm.RoleTool, Content: ToolMessageContent(res), ToolCallID: call.ID, Name: call.Name}
			msgs = append(msgs, toolMsg)
			out.NewMessages = append(out.NewMessages, toolMsg)
		}
	}
	out.StopReason = StopMaxTurns
	return out, nil
}

// ToolMessageContent is what the model is shown of a tool result.
func ToolMessageContent(res ToolResult) string {
	if res.IsError {
		return "error: " + res.Content
	}
	return res.Content
}

// Outline is in with its texts replaced by short stand-ins, keeping what
// the loop decides by (message count, tool choice, limits): what a durable
// run's workflow carries, while its activities load the full input from
// the run's snapshot.
func (in Input) Outline() Input {
	o := in
	if o.SystemPrompt != "" {
		o.SystemPrompt = "(system prompt)"
	}
	if len(in.History) > 0 {
		o.History = make([]llm.Message, len(in.History))
		for i, m := range in.History {
			o.History[i] = llm.Message{Role: m.Role}
		}
	}
	o.UserText = Summary(in.UserText, 200)
	o.Tools = nil
	return o
}

// Summary is s cut to at most max bytes (at a character boundary) with a
// note of the full size.
func Summary(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s… [%d bytes]", textcut.Prefix(s, max), len(s))
}

// decodeArgs reads a tool call's JSON arguments.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("arguments are not a valid JSON object: %v", err)
	}
	return nil
}
