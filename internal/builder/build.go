package builder

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
)

// EvalSuite is the eval suite of a build, in the format of `agentry eval`
// suite files: each case's reply must contain every expected text (case
// does not matter).
type EvalSuite struct {
	Name  string     `json:"name,omitempty"`
	Cases []EvalCase `json:"cases"`
}

// EvalCase is one prompt and what its reply must contain.
type EvalCase struct {
	Name             string   `json:"name,omitempty"`
	Input            string   `json:"input"`
	ExpectedContains []string `json:"expected_contains"`
}

// EvalResult is one case's outcome.
type EvalResult struct {
	Name    string   `json:"name"`
	Passed  bool     `json:"passed"`
	Reply   string   `json:"reply"`
	Missing []string `json:"missing,omitempty"`
}

// BuildRequest validates and saves a definition.
type BuildRequest struct {
	Definition string
	// Enabled saves the agent enabled (else disabled).
	Enabled bool
	// Overwrite replaces an agent with the same id (in the workspace's
	// agents folder); without it an existing id is a 409.
	Overwrite bool
	// Evals, when set, must pass before anything is saved.
	Evals *EvalSuite
	Who   Who
}

// BuildResult is the saved agent.
type BuildResult struct {
	ID      string       `json:"id"`
	Enabled bool         `json:"enabled"`
	File    string       `json:"file"`
	Evals   []EvalResult `json:"evals,omitempty"`
	Spent   Spent        `json:"spent"`
}

// EvalsFailedError is a build whose suite did not pass: 422 evals_failed
// with every result; nothing is saved.
type EvalsFailedError struct {
	Results []EvalResult
	Spent   Spent
}

func (e *EvalsFailedError) Error() string {
	failed := 0
	for _, r := range e.Results {
		if !r.Passed {
			failed++
		}
	}
	return fmt.Sprintf("%d of %d eval cases failed; the agent was not saved", failed, len(e.Results))
}

// Fault implements fault.Fault.
func (e *EvalsFailedError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindConflict, Code: "evals_failed", Message: e.Error(),
		Fields: map[string]any{"evals": e.Results, "spent": e.Spent}}
}

// Build checks a definition like a file on disk and against the catalog,
// refuses an existing id without Overwrite before any model call, runs the
// suite (each case one call of the definition's model with its system
// prompt, charged to the build's run) and saves the agent only when every
// case passed.
func (s *Service) Build(ctx context.Context, req BuildRequest) (*BuildResult, error) {
	switch {
	case strings.TrimSpace(req.Definition) == "":
		return nil, invalid("definition", "is required: the YAML text of the agent")
	case len(req.Definition) > MaxDefinition:
		return nil, invalid("definition", "is %d bytes; at most %d are accepted", len(req.Definition), MaxDefinition)
	}
	if req.Evals != nil {
		if len(req.Evals.Cases) > MaxEvalCases {
			return nil, invalid("evals.cases", "has %d cases; at most %d are accepted", len(req.Evals.Cases), MaxEvalCases)
		}
		for i, c := range req.Evals.Cases {
			if strings.TrimSpace(c.Input) == "" {
				return nil, invalid(fmt.Sprintf("evals.cases[%d].input", i), "is required")
			}
			if len(c.Input) > MaxDescription {
				return nil, invalid(fmt.Sprintf("evals.cases[%d].input", i), "is longer than %d bytes", MaxDescription)
			}
		}
	}
	cat := s.Catalog()
	def, err := cat.parse(req.Definition)
	if err != nil {
		return nil, err
	}
	if prev, ok := s.Agents.Get(def.ID); ok && !req.Overwrite {
		return nil, fmt.Errorf("%w: %q is defined in %s (build with overwrite to replace it)", agentdef.ErrExists, def.ID, prev.File)
	}
	r := s.newRun(req.Who, Model{}, &cat)
	res := &BuildResult{ID: def.ID, Enabled: req.Enabled}
	if req.Evals != nil && len(req.Evals.Cases) > 0 {
		passed := true
		for i, c := range req.Evals.Cases {
			resp, err := r.ask(ctx, &cat, def, c.Input)
			if err != nil {
				return nil, err
			}
			name := c.Name
			if name == "" {
				name = fmt.Sprintf("case %d", i+1)
			}
			out := EvalResult{Name: name, Reply: resp.Content, Passed: true}
			lower := strings.ToLower(resp.Content)
			for _, want := range c.ExpectedContains {
				if !strings.Contains(lower, strings.ToLower(want)) {
					out.Passed = false
					out.Missing = append(out.Missing, want)
				}
			}
			passed = passed && out.Passed
			res.Evals = append(res.Evals, out)
		}
		if !passed {
			r.settleSpent(ctx)
			return nil, &EvalsFailedError{Results: res.Evals, Spent: r.spent}
		}
	}
	text, err := agentdef.WithEnabled([]byte(req.Definition), req.Enabled)
	if err != nil {
		return nil, invalid("definition", "%v", err)
	}
	saved, err := s.Files.Install(text, nil, req.Overwrite)
	if err != nil {
		return nil, err
	}
	r.settleSpent(ctx)
	res.File, res.Spent = filepath.Base(saved.File), r.spent
	return res, nil
}

// ask sends one message to a draft: its provider and model with its system
// prompt, without tools (the draft is not saved, so nothing may run on its
// behalf), charged to the request's run.
func (r *run) ask(ctx context.Context, cat *Catalog, def *agentdef.Definition, text string) (*llm.Response, error) {
	provider, model := def.LLM.Provider, def.LLM.Model
	if provider == "" {
		provider = cat.DefaultProvider
	}
	if model == "" {
		if ms := cat.Providers[provider]; len(ms) > 0 {
			model = ms[0]
		}
	}
	maxTokens := def.LLM.MaxTokens
	if maxTokens <= 0 {
		maxTokens = EvalMaxTokens
	}
	var msgs []llm.Message
	if def.SystemPrompt != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: def.SystemPrompt})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: text})
	return r.call(ctx, provider, model, msgs, maxTokens)
}

// TryRequest sends one message to a draft before it is saved (the
// console's chat pane).
type TryRequest struct {
	Definition string
	Text       string
	Who        Who
}

// TryReply is the draft's answer.
type TryReply struct {
	Reply string `json:"reply"`
	Spent Spent  `json:"spent"`
}

// Try checks a draft like Build and sends it one message; nothing is saved.
func (s *Service) Try(ctx context.Context, req TryRequest) (*TryReply, error) {
	switch {
	case strings.TrimSpace(req.Definition) == "":
		return nil, invalid("definition", "is required: the YAML text of the agent")
	case len(req.Definition) > MaxDefinition:
		return nil, invalid("definition", "is %d bytes; at most %d are accepted", len(req.Definition), MaxDefinition)
	case strings.TrimSpace(req.Text) == "":
		return nil, invalid("text", "is required")
	case len(req.Text) > MaxDescription:
		return nil, invalid("text", "is %d bytes; at most %d are accepted", len(req.Text), MaxDescription)
	}
	cat := s.Catalog()
	def, err := cat.parse(req.Definition)
	if err != nil {
		return nil, err
	}
	r := s.newRun(req.Who, Model{}, &cat)
	resp, err := r.ask(ctx, &cat, def, req.Text)
	if err != nil {
		return nil, err
	}
	r.settleSpent(ctx)
	return &TryReply{Reply: resp.Content, Spent: r.spent}, nil
}
