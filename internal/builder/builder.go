// Package builder drafts agent definitions with a model: generate (a
// description in, a complete definition out), refine (a definition and an
// instruction in, the changed definition and a unified diff out) and build
// (validate, run the request's eval suite, save the agent disabled or
// enabled).
//
// Every request is its own accounting run: its calls go through the one
// LLM router with source builder and a fresh run id, so the cost controller
// charges them to that run's per-build allowance (llm.studio.max_build_tokens
// and max_build_cost_usd) and concurrent builds never share one. A request
// whose allowance runs out ends with AllowanceError, telling what the run
// spent.
//
// The model's output is checked like a file on disk (agentdef.ParseWith)
// and against the Catalog of what exists on this gateway and the
// allowlists admit: it can never name a provider, model, tool, MCP server,
// knowledge base, channel, skill or peer outside it.
package builder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/pmezard/go-difflib/difflib"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// Limits of the builder's input.
const (
	// MaxDescription bounds a description or an instruction (bytes).
	MaxDescription = 16 << 10
	// MaxDefinition bounds a definition's YAML text (bytes), the model's
	// drafts included.
	MaxDefinition = 64 << 10
	// MaxAttempts is how many drafts a generate or refine asks the model
	// for: after an invalid one the model is told the problems and asked
	// again.
	MaxAttempts = 3
	// MaxEvalCases bounds a build's eval suite.
	MaxEvalCases = 50
	// DraftMaxTokens is the output bound of one drafting call (the
	// allowance may clamp it further).
	DraftMaxTokens = 2048
	// EvalMaxTokens is the output bound of one eval case when the
	// definition sets no llm.max_tokens.
	EvalMaxTokens = 512
)

// Ledger is the part of the cost controller the builder reads back what a
// run spent from.
type Ledger interface {
	Flush(ctx context.Context) error
	Calls(ctx context.Context, f models.LedgerFilter, limit int) ([]models.LedgerEntry, error)
}

// Installer saves a definition (agentdef.Files).
type Installer interface {
	Install(data []byte, bundle map[string][]byte, overwrite bool) (*agentdef.Definition, error)
}

// Lookup finds loaded agents (agentdef.Registry).
type Lookup interface {
	Get(id string) (*agentdef.Definition, bool)
}

// Service is the builder. Router, Catalog, Agents and Files are required;
// Ledger may be nil (then the spent cost is not reported).
type Service struct {
	Router *llm.Router
	// Catalog tells what exists now (called once per request).
	Catalog func() Catalog
	Agents  Lookup
	Files   Installer
	Ledger  Ledger
}

// Who is the caller a request is attributed to.
type Who struct {
	Subject   string
	Workspace string
}

// Model picks the builder's own model for a request; empty fields take the
// catalog's default provider and model.
type Model struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
}

// Spent is what one request's run used.
type Spent struct {
	RunID        string  `json:"run_id"`
	Calls        int     `json:"calls"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostMicros   int64   `json:"cost_micros"`
	CostUSD      float64 `json:"cost_usd"`
}

// Draft is the answer of generate and refine.
type Draft struct {
	ID         string `json:"id"`
	Definition string `json:"definition"`
	// Diff is the unified diff from the given definition (refine only).
	Diff     string `json:"diff,omitempty"`
	Attempts int    `json:"attempts"`
	Spent    Spent  `json:"spent"`
}

// AllowanceError ends a request whose per-build allowance (or another
// budget) refused its next call: 402 with what the run spent.
type AllowanceError struct {
	Rejection *costs.Rejection
	Spent     Spent
}

func (e *AllowanceError) Error() string {
	return fmt.Sprintf("the build stopped: %s (run %s spent %d input + %d output tokens, $%.6f in %d calls)",
		e.Rejection.Message, e.Spent.RunID, e.Spent.InputTokens, e.Spent.OutputTokens, e.Spent.CostUSD, e.Spent.Calls)
}

func (e *AllowanceError) Unwrap() error { return e.Rejection }

// Fault implements fault.Fault: the rejection's status and code, with the
// spent figures.
func (e *AllowanceError) Fault() fault.Detail {
	d := e.Rejection.Fault()
	d.Message = e.Error()
	if d.Fields == nil {
		d.Fields = map[string]any{}
	}
	d.Fields["spent"] = e.Spent
	return d
}

// DraftError is a model that gave no valid definition in MaxAttempts
// drafts: 502 invalid_draft with the last problems.
type DraftError struct {
	Attempts int
	Last     error
	Spent    Spent
}

func (e *DraftError) Error() string {
	return fmt.Sprintf("the model gave no valid definition in %d attempts; the last: %v", e.Attempts, e.Last)
}

func (e *DraftError) Unwrap() error { return e.Last }

// Fault implements fault.Fault. A draft naming something outside the
// catalog stays that refusal (403 not_allowed, naming it).
func (e *DraftError) Fault() fault.Detail {
	var na *NotAllowedError
	if errors.As(e.Last, &na) {
		d := na.Fault()
		d.Message = fmt.Sprintf("refused after %d drafts: %s", e.Attempts, na.Error())
		d.Fields["spent"] = e.Spent
		return d
	}
	return fault.Detail{Kind: fault.KindUpstream, Code: "invalid_draft", Message: e.Error(), Fields: map[string]any{"spent": e.Spent}}
}

func invalid(field, format string, args ...any) error {
	return &fault.Invalid{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// run is one request's accounting run.
type run struct {
	s     *Service
	who   Who
	model Model
	spent Spent
}

func (s *Service) newRun(who Who, m Model, cat *Catalog) *run {
	if m.Provider == "" {
		m.Provider = cat.DefaultProvider
	}
	if m.Model == "" && m.Provider == cat.DefaultProvider {
		m.Model = cat.DefaultModel
	}
	if m.Model == "" {
		if ms := cat.Providers[m.Provider]; len(ms) > 0 {
			m.Model = ms[0]
		}
	}
	return &run{s: s, who: who, model: m, spent: Spent{RunID: "build_" + uuid.NewString()}}
}

// call makes one builder call of the run.
func (r *run) call(ctx context.Context, provider, model string, msgs []llm.Message, maxTokens int) (*llm.Response, error) {
	c := &llm.Call{Provider: provider, Model: model, Request: llm.Request{Model: model, Messages: msgs, MaxTokens: maxTokens},
		Meta: llm.CallMeta{Subject: r.who.Subject, Workspace: r.who.Workspace, RunID: r.spent.RunID, Source: llm.SourceBuilder, Interactive: true, ConfirmCost: true}}
	resp, err := r.s.Router.Do(ctx, c)
	if resp != nil {
		r.spent.Calls++
		r.spent.InputTokens += resp.Usage.InputTokens
		r.spent.OutputTokens += resp.Usage.OutputTokens
	}
	if err != nil {
		if rej, ok := costs.AsRejection(err); ok {
			r.settleSpent(ctx)
			return nil, &AllowanceError{Rejection: rej, Spent: r.spent}
		}
		return nil, err
	}
	return resp, nil
}

// settleSpent reads the run's cost back from the ledger.
func (r *run) settleSpent(ctx context.Context) {
	if r.s.Ledger == nil {
		return
	}
	if err := r.s.Ledger.Flush(ctx); err != nil {
		return
	}
	rows, err := r.s.Ledger.Calls(ctx, models.LedgerFilter{RunID: r.spent.RunID, ExcludeRejected: true}, 1000)
	if err != nil {
		return
	}
	var micros, in, out int64
	for _, row := range rows {
		micros += row.CostMicros
		in += row.InputTokens
		out += row.OutputTokens
	}
	r.spent.CostMicros, r.spent.CostUSD = micros, float64(micros)/1e6
	r.spent.Calls, r.spent.InputTokens, r.spent.OutputTokens = len(rows), in, out
}

// GenerateRequest asks for a new definition.
type GenerateRequest struct {
	Description string
	// ID, when set, is the id the definition must have.
	ID    string
	Model Model
	Who   Who
}

// Generate drafts a complete definition from a description.
func (s *Service) Generate(ctx context.Context, req GenerateRequest) (*Draft, error) {
	desc := strings.TrimSpace(req.Description)
	switch {
	case desc == "":
		return nil, invalid("description", "is required: say what the agent should do")
	case len(req.Description) > MaxDescription:
		return nil, invalid("description", "is %d bytes; at most %d are accepted", len(req.Description), MaxDescription)
	}
	if req.ID != "" {
		if err := (&agentdef.Definition{ID: req.ID}).Validate(); err != nil {
			return nil, invalid("id", "%q must be lower-case letters, digits, - or _ (at most 63)", req.ID)
		}
	}
	cat := s.Catalog()
	r := s.newRun(req.Who, req.Model, &cat)
	ask := "Write the agent definition for this description:\n\n" + desc
	if req.ID != "" {
		ask += "\n\nIts id must be " + req.ID + "."
	}
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: systemPrompt(&cat)}, {Role: llm.RoleUser, Content: ask}}
	return r.draft(ctx, &cat, msgs, req.ID, "")
}

// RefineRequest asks for a changed definition.
type RefineRequest struct {
	Definition  string
	Instruction string
	Model       Model
	Who         Who
}

// Refine changes a definition as instructed and returns it with the diff.
func (s *Service) Refine(ctx context.Context, req RefineRequest) (*Draft, error) {
	inst := strings.TrimSpace(req.Instruction)
	switch {
	case inst == "":
		return nil, invalid("instruction", "is required: say what to change")
	case len(req.Instruction) > MaxDescription:
		return nil, invalid("instruction", "is %d bytes; at most %d are accepted", len(req.Instruction), MaxDescription)
	case strings.TrimSpace(req.Definition) == "":
		return nil, invalid("definition", "is required: the YAML text of the agent to refine")
	case len(req.Definition) > MaxDefinition:
		return nil, invalid("definition", "is %d bytes; at most %d are accepted", len(req.Definition), MaxDefinition)
	}
	cat := s.Catalog()
	orig, err := agentdef.ParseWith([]byte(req.Definition), "definition", agentdef.Refs{KnowledgeBases: cat.KnowledgeBases})
	if err != nil {
		return nil, err
	}
	r := s.newRun(req.Who, req.Model, &cat)
	ask := "Here is an agent definition:\n\n```yaml\n" + strings.TrimRight(req.Definition, "\n") + "\n```\n\nChange it as follows, keeping everything else (its id stays " +
		orig.ID + "), and reply with the whole changed definition:\n\n" + inst
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: systemPrompt(&cat)}, {Role: llm.RoleUser, Content: ask}}
	return r.draft(ctx, &cat, msgs, orig.ID, req.Definition)
}

// draft asks the model for a definition until one passes (at most
// MaxAttempts), telling it the problems of the last one.
func (r *run) draft(ctx context.Context, cat *Catalog, msgs []llm.Message, id, before string) (*Draft, error) {
	var last error
	for attempt := 1; attempt <= MaxAttempts; attempt++ {
		resp, err := r.call(ctx, r.model.Provider, r.model.Model, msgs, DraftMaxTokens)
		if err != nil {
			return nil, err
		}
		text := extractYAML(resp.Content)
		def, err := r.s.checkText(cat, text)
		if err == nil && id != "" && def.ID != id {
			err = fmt.Errorf("id: is %q, it must be %q", def.ID, id)
		}
		if err == nil {
			r.settleSpent(ctx)
			d := &Draft{ID: def.ID, Definition: text, Attempts: attempt, Spent: r.spent}
			if before != "" {
				d.Diff = Diff(before, text, def.ID+".yaml")
			}
			return d, nil
		}
		last = err
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content},
			llm.Message{Role: llm.RoleUser, Content: "That definition cannot be used: " + err.Error() + "\nReply with the corrected definition only."})
	}
	r.settleSpent(ctx)
	return nil, &DraftError{Attempts: MaxAttempts, Last: last, Spent: r.spent}
}

// checkText validates a definition like a file on disk and against the
// catalog.
func (s *Service) checkText(cat *Catalog, text string) (*agentdef.Definition, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("the reply holds no definition")
	}
	if len(text) > MaxDefinition {
		return nil, fmt.Errorf("the definition is %d bytes; at most %d are accepted", len(text), MaxDefinition)
	}
	return cat.parse(text)
}

// extractYAML takes the definition out of a reply: the first fenced block
// if there is one, else the whole text.
func extractYAML(reply string) string {
	if i := strings.Index(reply, "```"); i >= 0 {
		rest := reply[i+3:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
		}
		if j := strings.Index(rest, "```"); j >= 0 {
			rest = rest[:j]
		}
		return strings.TrimSpace(rest) + "\n"
	}
	return strings.TrimSpace(reply) + "\n"
}

// Diff is the unified diff of two definitions (3 lines of context).
func Diff(before, after, name string) string {
	out, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: splitLines(before), B: splitLines(after),
		FromFile: "a/" + name, ToFile: "b/" + name, Context: 3,
	})
	if err != nil {
		return ""
	}
	return out
}

// splitLines splits text into lines that keep their newline (the last one
// gets one if it has none).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	lines := strings.SplitAfter(s, "\n")
	return lines[:len(lines)-1]
}

func systemPrompt(cat *Catalog) string {
	inv, _ := json.MarshalIndent(cat, "", "  ")
	return `You write agent definitions for the Agentry gateway: one YAML mapping with the keys
id (lower-case letters, digits, - or _), name, description, system_prompt,
llm: {provider, model, max_tokens, temperature}, builtins (tools), mcp (MCP server ids),
knowledge (knowledge base ids), channels, skills, peers (agent ids), max_turns.
Name only what this gateway has; this is everything you may name (JSON):
` + string(inv) + `
Leave out what the agent does not need. Reply with the YAML only, in one ` + "```yaml" + ` block.`
}
