package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/sandbox"
)

// RunPythonTool is the builtin that runs Python code in the sandbox
// (docs/sandbox.md).
const RunPythonTool = "run_python"

func init() {
	builtinTools[RunPythonTool] = llm.Tool{Name: RunPythonTool,
		Description: "Run Python 3 code in a sandbox. The run's work directory is the current directory and the only writable place (files written there are kept); /tmp is scratch. No network. Returns the exit status, stdout and stderr (each truncated).",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"code":{"type":"string","description":"Python source, run as __main__"},` +
			`"files":{"type":"object","additionalProperties":{"type":"string"},"description":"files to write into the work directory first: relative path -> text content"}},` +
			`"required":["code"]}`)}
}

// runPython runs the code with t.Code. Every problem is a tool error for
// the model; only the run's cancellation is an error.
func (t *Toolbox) runPython(ctx context.Context, workDir string, raw json.RawMessage) (ToolResult, error) {
	if t.Code == nil {
		return ToolResult{Content: "run_python is not available on this gateway (no executor)", IsError: true}, nil
	}
	if !utf8.Valid(raw) {
		return ToolResult{Content: "run_python: the arguments are not valid UTF-8 (code must be UTF-8 text)", IsError: true}, nil
	}
	var args struct {
		Code  string            `json:"code"`
		Files map[string]string `json:"files"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return ToolResult{Content: "run_python: " + err.Error(), IsError: true}, nil
	}
	req := sandbox.Request{Code: args.Code, Dir: workDir}
	paths := make([]string, 0, len(args.Files))
	for p := range args.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		req.Files = append(req.Files, sandbox.File{Path: p, Content: []byte(args.Files[p])})
	}
	res, err := t.Code.Run(ctx, req)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return ToolResult{}, ctx.Err()
		}
		return ToolResult{Content: "run_python: " + err.Error(), IsError: true}, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ToolResult{}, ctx.Err()
	}
	out := ToolResult{Content: pythonReport(res, ctx.Err() != nil, t.Timeout), IsError: res.ExitCode != 0 || res.CapHit != ""}
	// The input files are written by this call too.
	written := append([]string{}, res.Files...)
	for _, f := range req.Files {
		if rel, err := sandbox.ConfinedRel(f.Path); err == nil && !slices.Contains(written, rel) {
			written = append(written, rel)
		}
	}
	sort.Strings(written)
	for _, rel := range written {
		full := filepath.Join(workDir, rel)
		if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() {
			out.Files = append(out.Files, ProducedFile{Path: full, SizeBytes: fi.Size(), Tool: RunPythonTool})
		}
	}
	return out, nil
}

// capText explains a cap to the model.
var capText = map[sandbox.Cap]string{
	sandbox.CapWallTime:  "stopped: it ran longer than the wall-time cap (runtime.sandbox.wall_time)",
	sandbox.CapCPUTime:   "stopped: it used more CPU time than the cap (runtime.sandbox.cpu_time)",
	sandbox.CapMemory:    "stopped or failed: it needed more memory than the cap (runtime.sandbox.memory_mb)",
	sandbox.CapProcesses: "it tried to start more processes than the cap (runtime.sandbox.processes)",
	sandbox.CapOutput:    "stopped: it printed far more than the output cap (runtime.sandbox.output_bytes)",
	sandbox.CapFileSize:  "a file it wrote hit the size cap (runtime.sandbox.file_size_mb)",
}

// pythonReport is what the model reads of one execution.
func pythonReport(res sandbox.Result, timedOut bool, toolTimeout interface{ String() string }) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit status: %d", res.ExitCode)
	if res.Signal != "" {
		fmt.Fprintf(&b, " (killed: %s)", res.Signal)
	}
	b.WriteString("\n")
	if res.CapHit != "" {
		if timedOut && res.CapHit == sandbox.CapWallTime {
			fmt.Fprintf(&b, "stopped: it ran longer than the tool timeout (runtime.tool_timeout, %s)\n", toolTimeout)
		} else {
			b.WriteString(capText[res.CapHit] + "\n")
		}
	}
	section := func(name, text string, cut bool) {
		if text == "" && !cut {
			return
		}
		fmt.Fprintf(&b, "%s:\n%s", name, text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
		if cut {
			fmt.Fprintf(&b, "[%s truncated: only the first bytes are shown (runtime.sandbox.output_bytes)]\n", name)
		}
	}
	section("stdout", res.Stdout, res.StdoutTruncated)
	section("stderr", res.Stderr, res.StderrTruncated)
	if len(res.Files) > 0 {
		fmt.Fprintf(&b, "files written: %s\n", strings.Join(res.Files, ", "))
	}
	return b.String()
}
