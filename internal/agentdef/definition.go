// Package agentdef holds agent definitions: the YAML files, their parser
// and validation, the registry that loads a set of folders, and the writer
// of the managed folder (create, enable, disable, delete, install).
//
// It is apart from internal/agent (the agent loop and its tools, which
// re-exports these names) so that code which only reads or checks
// definitions, the agentry CLI's `agent validate` and the package format
// (internal/agentpkg), links no LLM client, MCP client or telemetry; see
// TestCLIImportsNoServerPackage in cli/agentry.
package agentdef

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/jsonpath"
	"github.com/agentryhq/agentry/internal/toolgrant"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/drivers"
)

// Triggers of an agent besides manual use (chat, task runs).
const (
	TriggerWebhook = "webhook"
	TriggerCron    = "cron"
)

// Definition is one agent, as written in its YAML file.
type Definition struct {
	ID           string          `yaml:"id" json:"id"`
	Name         string          `yaml:"name,omitempty" json:"name,omitempty"`
	Description  string          `yaml:"description,omitempty" json:"description"`
	Enabled      *bool           `yaml:"enabled,omitempty" json:"enabled"`
	Trigger      string          `yaml:"trigger,omitempty" json:"trigger,omitempty"`
	Webhook      *WebhookMapping `yaml:"webhook,omitempty" json:"webhook,omitempty"`
	Schedule     *Schedule       `yaml:"schedule,omitempty" json:"schedule,omitempty"`
	SystemPrompt string          `yaml:"system_prompt,omitempty" json:"system_prompt,omitempty"`
	LLM          LLMSettings     `yaml:"llm" json:"llm"`
	Channels     []string        `yaml:"channels,omitempty" json:"channels"`
	Builtins     []string        `yaml:"builtins,omitempty" json:"builtins"`
	// MCP lists the MCP servers whose tools the agent may use ("*": all).
	MCP []string `yaml:"mcp,omitempty" json:"mcp,omitempty"`
	// Skills names the skills whose instructions and tools the agent uses.
	Skills []string `yaml:"skills,omitempty" json:"skills,omitempty"`
	// Knowledge names the knowledge bases (knowledge.bases.<id>) the agent
	// answers from: passages added before each turn and the
	// knowledge_search tool.
	Knowledge []string `yaml:"knowledge,omitempty" json:"knowledge,omitempty"`
	MaxTurns  int      `yaml:"max_turns,omitempty" json:"max_turns,omitempty"`
	// Approvals names the tools a person must approve before a durable run
	// (task run, scheduled firing) executes them; chat refuses them.
	Approvals *Approvals `yaml:"approvals,omitempty" json:"approvals,omitempty"`
	// Memory opts the agent into memory (memory.go): true or a block.
	Memory *Memory `yaml:"memory,omitempty" json:"memory,omitempty"`
	// MaxCostUSD caps what one run of the agent may cost, with the runs it
	// delegates to (its run tree): the next LLM call that could pass it is
	// refused (cost_cap) and a durable run waits (docs/costs.md, "Cost caps").
	MaxCostUSD *float64 `yaml:"max_cost_usd,omitempty" json:"max_cost_usd,omitempty"`
	// Peers are the agents this one may delegate to (docs/teams.md): the
	// model gets one ask_<peer> tool per peer. The registry checks them on
	// load (peers.go): unknown ids and delegation cycles are errors.
	Peers []string `yaml:"peers,omitempty" json:"peers,omitempty"`
	// Voice opts the agent into realtime voice sessions (docs/voice.md):
	// POST /voice/sessions mints them only for such agents.
	Voice bool `yaml:"voice,omitempty" json:"voice,omitempty"`

	// File is where the definition was read from.
	File string `yaml:"-" json:"-"`
	// PeersLine is the line of the peers key in File (0: none or not read
	// from a file), for the registry's peer errors.
	PeersLine int `yaml:"-" json:"-"`
}

// LLMSettings pick and bound the model of an agent.
type LLMSettings struct {
	Provider           string   `yaml:"provider,omitempty" json:"provider"`
	Model              string   `yaml:"model,omitempty" json:"model"`
	MaxTokens          int      `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	Temperature        *float64 `yaml:"temperature,omitempty" json:"temperature,omitempty"`
	AllowedProviders   []string `yaml:"allowed_providers,omitempty" json:"allowed_providers,omitempty"`
	AllowedModels      []string `yaml:"allowed_models,omitempty" json:"allowed_models,omitempty"`
	DataClassification string   `yaml:"data_classification,omitempty" json:"data_classification,omitempty"`
}

// WebhookMapping maps an inbound webhook payload to a chat message. Paths
// use dot notation with an optional leading $ or $. and array indexes.
type WebhookMapping struct {
	TextPath      string `yaml:"text_path,omitempty" json:"text_path,omitempty"`
	UserIDPath    string `yaml:"user_id_path,omitempty" json:"user_id_path,omitempty"`
	UsernamePath  string `yaml:"username_path,omitempty" json:"username_path,omitempty"`
	ThreadIDPath  string `yaml:"thread_id_path,omitempty" json:"thread_id_path,omitempty"`
	SessionIDPath string `yaml:"session_id_path,omitempty" json:"session_id_path,omitempty"`
	IncludeRaw    bool   `yaml:"include_raw,omitempty" json:"include_raw,omitempty"`
	// ReplyOutput is where the reply of an asynchronous call
	// (?async=true) is delivered, besides being kept for
	// GET /webhooks/{agent_id}/runs/{run_id}.
	ReplyOutput *ScheduleOutput `yaml:"reply_output,omitempty" json:"reply_output,omitempty"`
}

// Schedule runs a cron agent and delivers its reply.
type Schedule struct {
	Cron     string         `yaml:"cron" json:"cron"`
	Timezone string         `yaml:"timezone,omitempty" json:"timezone,omitempty"`
	Prompt   string         `yaml:"prompt,omitempty" json:"prompt,omitempty"`
	Output   ScheduleOutput `yaml:"output" json:"output"`
}

// ScheduleOutput is where a scheduled reply goes.
type ScheduleOutput struct {
	Channel string `yaml:"channel,omitempty" json:"channel,omitempty"`
	To      string `yaml:"to,omitempty" json:"to,omitempty"`
}

// MaxCostMicros is max_cost_usd in micro-dollars (0: no cap).
func (d *Definition) MaxCostMicros() int64 {
	if d.MaxCostUSD == nil || *d.MaxCostUSD <= 0 {
		return 0
	}
	return int64(math.Round(*d.MaxCostUSD * 1e6))
}

// IsEnabled is true unless enabled: false.
func (d *Definition) IsEnabled() bool { return d.Enabled == nil || *d.Enabled }

// DisplayName is the name, or the id.
func (d *Definition) DisplayName() string {
	if d.Name != "" {
		return d.Name
	}
	return d.ID
}

// ToolGrants are the tool names the agent may call: its builtins and, per
// MCP server it opted into, the pattern mcp__<server>__*, per skill it
// names, skill__<skill>__*.
func (d *Definition) ToolGrants() []string {
	out := append([]string(nil), d.Builtins...)
	for _, id := range d.MCP {
		out = append(out, toolgrant.MCP(id))
	}
	for _, name := range d.Skills {
		out = append(out, toolgrant.Skill(name))
	}
	if len(d.Knowledge) > 0 {
		out = append(out, "knowledge_search")
		for _, b := range d.Knowledge {
			out = append(out, toolgrant.Knowledge(b))
		}
	}
	return append(out, d.Memory.MemoryTools()...)
}

// Known builtin tools.
var KnownBuiltins = []string{"write_file", "read_file", "http_get", "run_python"}

var idRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// cronParser accepts 5-field expressions and @every/@daily descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron validates a cron expression (5 fields or a descriptor).
func ParseCron(expr string) (cron.Schedule, error) { return cronParser.Parse(expr) }

// FieldError is one problem in a definition file: file, line, key, why.
type FieldError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Key, e.Msg)
}

// ValidationError lists every problem of one file.
type ValidationError struct{ Problems []FieldError }

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "; ")
}

// Fault implements fault.Fault: 400 invalid_definition with every problem
// (file, line, key, message).
func (e *ValidationError) Fault() fault.Detail {
	probs := make([]map[string]any, 0, len(e.Problems))
	for _, p := range e.Problems {
		probs = append(probs, map[string]any{"file": p.File, "line": p.Line, "key": p.Key, "message": p.Msg})
	}
	return fault.Detail{Kind: fault.KindInvalid, Code: "invalid_definition", Message: e.Error(), Fields: map[string]any{"problems": probs}}
}

// Parse reads and validates one definition. Errors carry file, line and key.
func Parse(data []byte, file string) (*Definition, error) { return ParseWith(data, file, Refs{}) }

// ParseWith is Parse that also checks the definition's references against
// refs (knowledge bases).
func ParseWith(data []byte, file string, refs Refs) (*Definition, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &ValidationError{Problems: []FieldError{{File: file, Line: yamlErrLine(err), Msg: err.Error()}}}
	}
	if root.Kind == 0 || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, &ValidationError{Problems: []FieldError{{File: file, Msg: "an agent definition must be a YAML mapping"}}}
	}
	if n := countKeys(root.Content[0], MaxKeys+1); n > MaxKeys {
		return nil, &TooManyKeysError{File: file, Keys: n}
	}
	lines := map[string]int{}
	indexLines(root.Content[0], "", lines)
	var d Definition
	if err := root.Content[0].Decode(&d); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			var probs []FieldError
			for _, e := range te.Errors {
				line := yamlErrLine(errors.New(e))
				probs = append(probs, FieldError{File: file, Line: line, Key: keyAtLine(lines, line), Msg: stripLine(e)})
			}
			return nil, &ValidationError{Problems: probs}
		}
		return nil, &ValidationError{Problems: []FieldError{{File: file, Msg: err.Error()}}}
	}
	d.File = file
	d.PeersLine = lines["peers"]
	if probs := append(d.validate(), d.checkRefs(refs)...); len(probs) > 0 {
		for i := range probs {
			probs[i].File = file
			probs[i].Line = lines[probs[i].Key]
		}
		return nil, &ValidationError{Problems: probs}
	}
	return &d, nil
}

// Validate checks a definition built in code (no file positions).
func (d *Definition) Validate() error {
	if probs := d.validate(); len(probs) > 0 {
		for i := range probs {
			probs[i].File = d.File
		}
		return &ValidationError{Problems: probs}
	}
	return nil
}

func (d *Definition) validate() []FieldError {
	var p []FieldError
	bad := func(key, format string, args ...any) {
		p = append(p, FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if d.ID == "" {
		bad("id", "is required")
	} else if !idRe.MatchString(d.ID) {
		bad("id", "%q must be lower-case letters, digits, - or _ (at most 63)", d.ID)
	}
	switch d.Trigger {
	case "", "manual", TriggerWebhook:
	case TriggerCron:
		if d.Schedule == nil || d.Schedule.Cron == "" {
			bad("schedule.cron", "is required when trigger is cron")
		}
	default:
		bad("trigger", "unknown trigger %q (use webhook or cron, or leave it out)", d.Trigger)
	}
	if d.Schedule != nil {
		if d.Schedule.Cron != "" {
			if _, err := ParseCron(d.Schedule.Cron); err != nil {
				bad("schedule.cron", "%q does not parse: %v", d.Schedule.Cron, err)
			}
		}
		if d.Schedule.Timezone != "" {
			if _, err := time.LoadLocation(d.Schedule.Timezone); err != nil {
				bad("schedule.timezone", "unknown time zone %q", d.Schedule.Timezone)
			}
		}
	}
	if d.LLM.MaxTokens < 0 {
		bad("llm.max_tokens", "must not be negative")
	}
	// Written so that NaN (which YAML's .nan gives) is outside the range too.
	if t := d.LLM.Temperature; t != nil && !(*t >= 0 && *t <= 2) {
		bad("llm.temperature", "%v is outside 0..2", *t)
	}
	if d.LLM.Provider != "" && len(d.LLM.AllowedProviders) > 0 && !slices.Contains(d.LLM.AllowedProviders, d.LLM.Provider) {
		bad("llm.provider", "%q is not in llm.allowed_providers", d.LLM.Provider)
	}
	if d.LLM.Model != "" && len(d.LLM.AllowedModels) > 0 && !slices.Contains(d.LLM.AllowedModels, d.LLM.Model) {
		bad("llm.model", "%q is not in llm.allowed_models", d.LLM.Model)
	}
	for _, b := range d.Builtins {
		if _, driver := drivers.LookupTool(b); !slices.Contains(KnownBuiltins, b) && !driver {
			bad("builtins", "unknown builtin %q (known: %s, and the tools of drivers built in with agentryd build --with)", b, strings.Join(KnownBuiltins, ", "))
		}
	}
	for _, id := range d.MCP {
		if id != "*" && !toolgrant.ValidMCPServerID(id) {
			bad("mcp", "%q is not an MCP server id (or * for all)", id)
		}
	}
	for _, name := range d.Skills {
		if !toolgrant.ValidSkillName(name) {
			bad("skills", "%q is not a skill name (lower-case letters, digits and single hyphens)", name)
		}
	}
	if a := d.Approvals; a != nil {
		if len(a.Tools) == 0 {
			bad("approvals.tools", "is required: name the tools that need a person's approval (or remove approvals)")
		}
		for _, t := range a.Tools {
			if strings.TrimSpace(t) == "" || strings.Contains(strings.TrimSuffix(t, "*"), "*") {
				bad("approvals.tools", "%q is not a tool name (a name, or a prefix ending in * such as mcp__github__*)", t)
			}
		}
		if a.Timeout != "" {
			if w, err := time.ParseDuration(a.Timeout); err != nil || w <= 0 {
				bad("approvals.timeout", "%q is not a positive duration such as 24h or 30m", a.Timeout)
			}
		}
	}
	// Written so that NaN is refused too.
	if c := d.MaxCostUSD; c != nil && !(*c >= 0 && *c <= 1e6) {
		bad("max_cost_usd", "%v must be a number of US dollars from 0 to 1000000 (0 or absent: no cap)", *c)
	}
	p = append(p, d.validatePeers()...)
	if d.MaxTurns < 0 || d.MaxTurns > 100 {
		bad("max_turns", "%d is outside 0..100", d.MaxTurns)
	}
	if w := d.Webhook; w != nil {
		// A bad path would fail every call with 400: refuse it at load.
		for _, kp := range [][2]string{{"text_path", w.TextPath}, {"user_id_path", w.UserIDPath},
			{"username_path", w.UsernamePath}, {"thread_id_path", w.ThreadIDPath}, {"session_id_path", w.SessionIDPath}} {
			key, path := kp[0], kp[1]
			if path == "" {
				continue
			}
			if _, err := jsonpath.Parse(path); err != nil {
				bad("webhook."+key, "%v", err)
			}
		}
	}
	return p
}

var lineRe = regexp.MustCompile(`line (\d+)`)

func yamlErrLine(err error) int {
	m := lineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n
}

func stripLine(msg string) string {
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "line ") {
		return msg[i+2:]
	}
	return msg
}

func indexLines(n *yaml.Node, prefix string, out map[string]int) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		if prefix != "" {
			key = prefix + "." + key
		}
		out[key] = n.Content[i].Line
		indexLines(n.Content[i+1], key, out)
	}
}

func keyAtLine(lines map[string]int, line int) string {
	best := ""
	for k, l := range lines {
		if l == line && len(k) > len(best) {
			best = k
		}
	}
	return best
}

// MaxKeys bounds the mapping keys of a definition, counted at every level.
// Decoding a YAML mapping into the definition checks each key against the
// others (quadratic): 10,000 keys took 1.1 s and 100,000 keys 85 s of CPU
// (#42). Real definitions have a few dozen.
const MaxKeys = 1000

// TooManyKeysError is a definition over MaxKeys keys, refused before it is
// decoded.
type TooManyKeysError struct {
	File string
	Keys int // counted up to MaxKeys+1
}

func (e *TooManyKeysError) Error() string {
	return fmt.Sprintf("%s: agent definition has more than %d keys (the limit)", e.File, MaxKeys)
}

// countKeys counts the mapping keys under n, stopping once past stop (a
// linear walk of the parsed tree; aliases are not followed).
func countKeys(n *yaml.Node, stop int) int {
	count := 0
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if count > stop {
			return
		}
		if n.Kind == yaml.MappingNode {
			count += len(n.Content) / 2
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return count
}
