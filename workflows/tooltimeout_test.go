package workflows_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/workflows"
)

// The tool activity's start-to-close timeout follows runtime.tool_timeout
// carried in the input (plus the step's margin); an input without it (a
// run requested before the field existed) keeps the fixed 5 minutes.
func TestTaskRunToolTimeoutFollowsConfig(t *testing.T) {
	for _, tc := range []struct {
		configured, want time.Duration
	}{
		{10 * time.Minute, 10*time.Minute + workflows.ToolStepMargin},
		{30 * time.Second, 30*time.Second + workflows.ToolStepMargin},
		{0, 5 * time.Minute},
	} {
		h := newHarness(t)
		h.onLLM(0, func(n int, _ workflows.LLMTurnInput) (*llm.Response, error) {
			if n == 1 {
				return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{}`)}}}, nil
			}
			return &llm.Response{Content: "Done."}, nil
		})
		got := startToClose(h.env, workflows.ActivityTaskRunTool)
		in := input()
		in.ToolTimeout = tc.configured
		h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
		if err := h.env.GetWorkflowError(); err != nil || len(h.tools) != 1 {
			t.Fatalf("tool_timeout %s: err %v, tool calls %d", tc.configured, err, len(h.tools))
		}
		if got() != tc.want {
			t.Errorf("tool_timeout %s: the tool activity's start-to-close timeout is %s, want %s", tc.configured, got(), tc.want)
		}
	}
}

// A firing's tool step follows runtime.tool_timeout as its prepare step
// recorded it; a prepare result without it (histories from before) keeps
// the fixed 5 minutes.
func TestFiringToolTimeoutFollowsPrepare(t *testing.T) {
	for _, tc := range []struct {
		configured, want time.Duration
	}{
		{2 * time.Minute, 2*time.Minute + workflows.ToolStepMargin},
		{0, 5 * time.Minute},
	} {
		prep := preparedRun
		prep.ToolTimeout = tc.configured
		f := newFiringEnv(t, prep, func(in workflows.LLMTurnInput) (*llm.Response, error) {
			if in.Turn == 1 {
				return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{}`)}}}, nil
			}
			return &llm.Response{Content: "The report."}, nil
		})
		got := startToClose(f.env, workflows.ActivityScheduledTool)
		f.run(t)
		if err := f.env.GetWorkflowError(); err != nil || len(f.tools) != 1 {
			t.Fatalf("tool_timeout %s: err %v, tool calls %d", tc.configured, err, len(f.tools))
		}
		if got() != tc.want {
			t.Errorf("tool_timeout %s: the firing's tool activity has start-to-close %s, want %s", tc.configured, got(), tc.want)
		}
	}
}

// startToClose reports the start-to-close timeout the named activity (or
// local activity) was last started with in env.
func startToClose(env *testsuite.TestWorkflowEnvironment, activityName string) func() time.Duration {
	var mu sync.Mutex
	var got time.Duration
	seen := func(info *activity.Info) {
		if info.ActivityType.Name == activityName {
			mu.Lock()
			got = info.StartToCloseTimeout
			mu.Unlock()
		}
	}
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) { seen(info) })
	// The built-in file tools may run as local activities (LocalFileTools).
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) { seen(info) })
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// The built-in file tools run as local activities (one workflow task and
// one activity task fewer per call) in runs whose input asks for it, other
// tools as activities; a run requested before (no flag) keeps activities.
func TestFileToolsRunAsLocalActivities(t *testing.T) {
	for _, localFileTools := range []bool{true, false} {
		h := newHarness(t)
		h.onLLM(0, func(n int, _ workflows.LLMTurnInput) (*llm.Response, error) {
			if n == 1 {
				return &llm.Response{ToolCalls: []llm.ToolCall{
					{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{}`)},
					{ID: "c2", Name: "http_get", Arguments: json.RawMessage(`{}`)},
					{ID: "c3", Name: "read_file", Arguments: json.RawMessage(`{}`)}}}, nil
			}
			return &llm.Response{Content: "Done."}, nil
		})
		var mu sync.Mutex
		var local, remote []string
		h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
			if info.ActivityType.Name == workflows.ActivityTaskRunTool {
				mu.Lock()
				local = append(local, args[0].(workflows.ToolInput).Name)
				mu.Unlock()
			}
		})
		h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
			if info.ActivityType.Name == workflows.ActivityTaskRunTool {
				var in workflows.ToolInput
				_ = args.Get(&in)
				mu.Lock()
				remote = append(remote, in.Name)
				mu.Unlock()
			}
		})
		in := input()
		in.LocalFileTools = localFileTools
		h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
		if err := h.env.GetWorkflowError(); err != nil || len(h.tools) != 3 {
			t.Fatalf("local file tools %v: err %v, tool calls %d", localFileTools, err, len(h.tools))
		}
		mu.Lock()
		wantLocal, wantRemote := []string{"write_file", "read_file"}, []string{"http_get"}
		if !localFileTools {
			wantLocal, wantRemote = nil, []string{"write_file", "http_get", "read_file"}
		}
		if !slices.Equal(local, wantLocal) || !slices.Equal(remote, wantRemote) {
			t.Errorf("local file tools %v: local activities %v, activities %v; want %v and %v", localFileTools, local, remote, wantLocal, wantRemote)
		}
		mu.Unlock()
		if h.tools[0].ResultSeq+1 != h.tools[1].ResultSeq || h.tools[1].ResultSeq+1 != h.tools[2].ResultSeq {
			t.Errorf("tool result positions %+v, want consecutive", h.tools)
		}
	}
}
