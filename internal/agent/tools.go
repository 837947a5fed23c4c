package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/skills"
	"github.com/agentryhq/agentry/internal/telemetry"

	"github.com/agentryhq/agentry/internal/textcut"
)

// Limits of the builtin tools.
const (
	maxReadBytes  = 1 << 20
	maxWriteBytes = 10 << 20
	maxFetchBytes = 256 << 10
)

var builtinTools = map[string]llm.Tool{
	"write_file": {Name: "write_file", Description: "Write a text file in the run's work directory. Paths are relative to it.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative path"},"content":{"type":"string"}},"required":["path","content"]}`)},
	"read_file": {Name: "read_file", Description: "Read a text file from the run's work directory.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative path"}},"required":["path"]}`)},
	"http_get": {Name: "http_get", Description: "Fetch a public http(s) URL and return the start of its body.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`)},
}

// ToolsFor returns the tool schemas of an agent's builtins, in the order
// the definition lists them.
func ToolsFor(builtins []string) []llm.Tool {
	var out []llm.Tool
	for _, b := range builtins {
		if t, ok := builtinTools[b]; ok {
			out = append(out, t)
		} else if d, ok := drivers.LookupTool(b); ok {
			out = append(out, llm.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
		}
	}
	return out
}

// DefaultToolOutputCap is the default of runtime.tool_output_cap: the most
// bytes of one tool result the model is shown.
const DefaultToolOutputCap = 32 << 10

// Toolbox executes builtin tools and MCP tools. File tools are confined to
// a work directory; http_get passes the SSRF policy; mcp__<server>__<tool>
// calls go to the MCP manager.
type Toolbox struct {
	HTTP    *http.Client
	Timeout time.Duration
	// MCP runs MCP tools; nil when no server is configured.
	MCP *mcp.Manager
	// OutputCap bounds the result text of one call (runtime.tool_output_cap;
	// 0 means DefaultToolOutputCap): a longer result is cut, with a note
	// telling the model so. It never fails the call.
	OutputCap int
	// Skills runs skill tools and holds their instructions; nil: none.
	Skills *skills.Registry
	// Memory runs the memory tools and pins hot memory (memorytools.go);
	// nil: no agent has memory.
	Memory Memory
	// Knowledge searches knowledge bases (knowledge.go); nil: none.
	Knowledge Knowledge
	// Code runs run_python (runtime.sandbox, executor); nil: refused.
	Code sandbox.Executor
}

// Tools are the schemas of every tool an agent may use: its builtins, then
// the tools of the MCP servers it opted into.
func (t *Toolbox) Tools(def *agentdef.Definition) []llm.Tool {
	tools := ToolsFor(def.Builtins)
	if t != nil && t.MCP != nil {
		tools = append(tools, t.MCP.Tools(def.MCP)...)
	}
	if t != nil && t.Skills != nil {
		tools = append(tools, t.Skills.Tools(def.Skills)...)
	}
	if t != nil && t.Knowledge != nil && len(def.Knowledge) > 0 {
		tools = append(tools, t.knowledgeTool(def.Knowledge))
	}
	return append(tools, t.memoryTools(def)...)
}

// SystemPrompt is the agent's system prompt followed by the instructions
// of the skills it names (those that are loaded).
func (t *Toolbox) SystemPrompt(def *agentdef.Definition) string {
	if t == nil || t.Skills == nil || len(def.Skills) == 0 {
		return def.SystemPrompt
	}
	extra := t.Skills.Instructions(def.Skills)
	if def.SystemPrompt == "" {
		return strings.TrimLeft(extra, "\n")
	}
	return def.SystemPrompt + extra
}

// NewToolbox builds a toolbox with the runtime's SSRF policy.
func NewToolbox(policy netguard.Policy, timeout time.Duration) *Toolbox {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Toolbox{HTTP: policy.Client(timeout), Timeout: timeout}
}

// Execute runs one tool call in workDir for an agent that allows builtins.
// Problems the model caused (bad arguments, path escapes, blocked URLs) are
// returned as error results; only ctx cancellation is an error.
func (t *Toolbox) Execute(ctx context.Context, workDir string, allowed []string, call llm.ToolCall) (res ToolResult, err error) {
	ctx, span := telemetry.Tracer().Start(ctx, "execute_tool "+call.Name)
	defer func() { endToolSpan(span, call, res, err) }()
	return t.execute(ctx, workDir, allowed, call)
}

// endToolSpan records a tool call's outcome on its span and in
// agentry_tool_calls_total; arguments and results only with
// telemetry.capture_content.
func endToolSpan(span trace.Span, call llm.ToolCall, res ToolResult, err error) {
	outcome := "ok"
	if err != nil || res.IsError {
		outcome = "error"
	}
	telemetry.ToolCalled(call.Name, outcome)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", call.Name),
			attribute.String("gen_ai.tool.call.id", call.ID), attribute.String("agentry.tool.outcome", outcome))
		if telemetry.CaptureContent() {
			span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", string(call.Arguments)), attribute.String("gen_ai.tool.call.result", res.Content))
		}
		if outcome == "error" {
			span.SetStatus(codes.Error, "tool error")
		}
	}
	span.End()
}

// execute runs the call. allowed holds the agent's tool grants
// (Definition.ToolGrants). An MCP server that cannot be reached is an
// *mcp.TransportError: task runs retry it as an activity, chat shows it to
// the model.
func (t *Toolbox) execute(ctx context.Context, workDir string, allowed []string, call llm.ToolCall) (ToolResult, error) {
	if !slices.Contains(allowed, call.Name) && !mcp.Granted(allowed, call.Name) && !skillGranted(allowed, call.Name) {
		return ToolResult{Content: fmt.Sprintf("unknown tool %q", call.Name), IsError: true}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	if strings.HasPrefix(call.Name, mcp.ToolPrefix) {
		if t.MCP == nil {
			return ToolResult{Content: fmt.Sprintf("unknown tool %q", call.Name), IsError: true}, nil
		}
		res, err := t.MCP.Call(ctx, call.Name, call.Arguments)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return ToolResult{Content: fmt.Sprintf("%s did not answer within %s", call.Name, t.Timeout), IsError: true}, nil
		}
		if err != nil {
			return ToolResult{}, err
		}
		return ToolResult{Content: CapOutput(res.Content, t.OutputCap), IsError: res.IsError}, nil
	}
	if strings.HasPrefix(call.Name, skills.ToolPrefix) {
		if t.Skills == nil {
			return ToolResult{Content: fmt.Sprintf("unknown tool %q", call.Name), IsError: true}, nil
		}
		res, err := t.Skills.Call(ctx, call.Name, call.Arguments)
		return ToolResult{Content: CapOutput(res.Content, t.OutputCap), IsError: res.IsError}, err
	}
	if isMemoryTool(call.Name) {
		res, err := t.callMemory(ctx, call)
		res.Content = CapOutput(res.Content, t.OutputCap)
		return res, err
	}
	var res ToolResult
	var err error
	switch call.Name {
	case "write_file":
		res, err = writeFile(workDir, call.Arguments)
	case "read_file":
		res, err = readFile(workDir, call.Arguments)
	case "http_get":
		res, err = t.httpGet(ctx, call.Arguments)
	case KnowledgeSearchTool:
		res, err = t.knowledgeSearch(ctx, allowed, call.Arguments)
	case RunPythonTool:
		res, err = t.runPython(ctx, workDir, call.Arguments)
	default:
		d, ok := drivers.LookupTool(call.Name)
		if !ok {
			return ToolResult{Content: fmt.Sprintf("unknown tool %q", call.Name), IsError: true}, nil
		}
		// A driver tool (agentryd build --with): its text is the result.
		res, err = runDriverTool(ctx, d, call.Arguments)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return ToolResult{}, err
		}
		return ToolResult{Content: err.Error(), IsError: true}, nil
	}
	res.Content = CapOutput(res.Content, t.OutputCap)
	return res, nil
}

// skillGranted: the agent names the skill of a skill__<skill>__<tool> call.
func skillGranted(allowed []string, name string) bool {
	skill, _, ok := skills.SplitToolName(name)
	return ok && slices.Contains(allowed, skills.Grant(skill))
}

// runDriverTool runs a driver's tool; a panic in driver code becomes a
// failed tool call instead of taking the gateway down.
func runDriverTool(ctx context.Context, d drivers.Tool, args json.RawMessage) (res ToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = ToolResult{}, fmt.Errorf("tool %s failed: %v", d.Name, p)
		}
	}()
	out, err := d.Run(ctx, args)
	return ToolResult{Content: out}, err
}

// CapOutput cuts a tool result to limit bytes (0: DefaultToolOutputCap) at
// a character boundary and says so at the end, so the model knows it saw
// only the start.
func CapOutput(s string, limit int) string {
	if limit <= 0 {
		limit = DefaultToolOutputCap
	}
	if len(s) <= limit {
		return s
	}
	shown := textcut.Prefix(s, limit)
	return fmt.Sprintf("%s\n[truncated: the tool returned %d bytes; only the first %d are shown (runtime.tool_output_cap)]", shown, len(s), len(shown))
}

// ConfinedPath resolves rel inside root, refusing absolute paths, ".."
// escapes and symlinks that lead outside.
func ConfinedPath(root, rel string) (string, error) {
	if rel == "" {
		return "", errors.New("path is required")
	}
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("path %q must be relative to the work directory", rel)
	}
	clean := filepath.Clean(rel)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q leaves the work directory", rel)
	}
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("work directory: %w", err)
	}
	full := filepath.Join(rootReal, clean)
	// Resolve the deepest existing ancestor: a symlink anywhere on the way
	// must still land inside the root.
	probe := full
	for {
		if real, err := filepath.EvalSymlinks(probe); err == nil {
			rest, _ := filepath.Rel(probe, full)
			resolved := filepath.Join(real, rest)
			if resolved != rootReal && !strings.HasPrefix(resolved, rootReal+string(filepath.Separator)) {
				return "", fmt.Errorf("path %q leaves the work directory", rel)
			}
			return resolved, nil
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return "", fmt.Errorf("path %q: cannot resolve", rel)
		}
		probe = parent
	}
}

func writeFile(workDir string, raw json.RawMessage) (ToolResult, error) {
	var args struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return ToolResult{}, err
	}
	if len(args.Content) > maxWriteBytes {
		return ToolResult{}, fmt.Errorf("content exceeds %d bytes", maxWriteBytes)
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return ToolResult{}, err
	}
	path, err := ConfinedPath(workDir, args.Path)
	if err != nil {
		return ToolResult{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return ToolResult{}, err
	}
	if err := os.WriteFile(path, []byte(args.Content), 0o644); err != nil {
		return ToolResult{}, err
	}
	return ToolResult{
		Content: fmt.Sprintf("wrote %d bytes to %s", len(args.Content), args.Path),
		Files:   []ProducedFile{{Path: path, SizeBytes: int64(len(args.Content)), Tool: "write_file"}},
	}, nil
}

func readFile(workDir string, raw json.RawMessage) (ToolResult, error) {
	var args struct {
		Path string `json:"path"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return ToolResult{}, err
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return ToolResult{}, err
	}
	path, err := ConfinedPath(workDir, args.Path)
	if err != nil {
		return ToolResult{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return ToolResult{}, fmt.Errorf("read %s: %w", args.Path, errors.Unwrap(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return ToolResult{}, err
	}
	if len(data) > maxReadBytes {
		return ToolResult{Content: string(data[:maxReadBytes]) + "\n[truncated]"}, nil
	}
	return ToolResult{Content: string(data)}, nil
}

func (t *Toolbox) httpGet(ctx context.Context, raw json.RawMessage) (ToolResult, error) {
	var args struct {
		URL string `json:"url"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return ToolResult{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return ToolResult{}, fmt.Errorf("bad url: %v", err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return ToolResult{}, fmt.Errorf("only http and https URLs are allowed")
	}
	drivers.SetIdempotencyKey(req)
	resp, err := t.HTTP.Do(req)
	if err != nil {
		return ToolResult{}, fmt.Errorf("fetch %s: %v", args.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxFetchBytes))
	return ToolResult{Content: fmt.Sprintf("HTTP %d\n%s", resp.StatusCode, body)}, nil
}
