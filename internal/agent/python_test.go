package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/process"
)

func pythonToolbox(t *testing.T, python string) *Toolbox {
	t.Helper()
	tb := NewToolbox(netguard.Policy{}, time.Minute)
	tb.Code = process.New(sandbox.NewJail(sandbox.JailConfig{PythonPath: python}))
	return tb
}

func callPython(t *testing.T, tb *Toolbox, dir string, args string) ToolResult {
	t.Helper()
	res, err := tb.Execute(context.Background(), dir, []string{RunPythonTool}, llm.ToolCall{ID: "c1", Name: RunPythonTool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return res
}

func TestRunPythonWritesArtifacts(t *testing.T) {
	tb := pythonToolbox(t, "")
	dir := t.TempDir()
	res := callPython(t, tb, dir, `{"code":"import csv\nrows=[r for r in csv.reader(open('in.csv'))]\nwith open('out.csv','w') as f:\n    csv.writer(f).writerows(rows + [['c','3']])\nprint(len(rows))","files":{"in.csv":"a,1\nb,2\n"}}`)
	if res.IsError || !strings.Contains(res.Content, "exit status: 0") || !strings.Contains(res.Content, "stdout:\n2\n") {
		t.Fatalf("%+v", res)
	}
	var names []string
	for _, f := range res.Files {
		names = append(names, filepath.Base(f.Path)+":"+f.Tool)
	}
	if strings.Join(names, ",") != "in.csv:run_python,out.csv:run_python" {
		t.Fatalf("produced files %v", names)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.csv")); !strings.Contains(string(b), "c,3") {
		t.Fatalf("out.csv %q", b)
	}
}

func TestRunPythonErrorsForTheModel(t *testing.T) {
	tb := pythonToolbox(t, "")
	dir := t.TempDir()
	for name, tc := range map[string]struct{ args, want string }{
		"not UTF-8":      {"{\"code\":\"print('\xff')\"}", "not valid UTF-8"},
		"empty":          {`{"code":""}`, "code is empty"},
		"not JSON":       {`{"code":`, "not a valid JSON object"},
		"1 MB of code":   {`{"code":"#` + strings.Repeat("x", sandbox.MaxCodeBytes) + `"}`, "at most"},
		"escaping files": {`{"code":"print(1)","files":{"../../etc/x":"x"}}`, "leaves the work directory"},
		"absolute files": {`{"code":"print(1)","files":{"/etc/x":"x"}}`, "must be relative"},
		"exception":      {`{"code":"raise ValueError('boom')"}`, "ValueError: boom"},
		"exit status":    {`{"code":"import sys; sys.exit(4)"}`, "exit status: 4"},
	} {
		t.Run(name, func(t *testing.T) {
			res := callPython(t, tb, dir, tc.args)
			if !res.IsError || !strings.Contains(res.Content, tc.want) {
				t.Fatalf("want an error result with %q, got %+v", tc.want, res)
			}
		})
	}
	t.Run("missing interpreter", func(t *testing.T) {
		res := callPython(t, pythonToolbox(t, "/nonexistent/python"), dir, `{"code":"print(1)"}`)
		if !res.IsError || !strings.Contains(res.Content, "runtime.python_path") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("no executor", func(t *testing.T) {
		res := callPython(t, NewToolbox(netguard.Policy{}, time.Minute), dir, `{"code":"print(1)"}`)
		if !res.IsError || !strings.Contains(res.Content, "not available") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("a cap", func(t *testing.T) {
		res := callPython(t, tb, dir, `{"code":"import sys\nfor _ in range(10000): sys.stdout.write('x'*1000)"}`)
		if !res.IsError || !strings.Contains(res.Content, "runtime.sandbox.output_bytes") {
			t.Fatalf("%+v", res.Content[:200])
		}
	})
}
