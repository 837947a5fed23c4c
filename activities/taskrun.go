// Package activities holds Agentry's Temporal activities: structs that hold
// their dependencies (store, LLM router, toolbox), whose methods are the
// activities. The worker registers each struct once; tests build them with
// real or fake dependencies and call the methods directly.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/internal/skills"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// DefaultHeartbeatInterval is how often long activities heartbeat. The
// workflow's heartbeat timeout must be well above it: after a worker
// crash, Temporal retries an in-flight activity once its heartbeat times
// out.
const DefaultHeartbeatInterval = 3 * time.Second

// Notifier wakes event subscribers after events were committed
// (*events.Bus).
type Notifier interface{ Notify() }

// TaskRunActivities are the activities of the TaskRun workflow.
type TaskRunActivities struct {
	Store   TaskRunStore
	Router  *llm.Router
	Toolbox *agent.Toolbox
	Events  Notifier
	// Log stores the runs' conversations and agent snapshots.
	Log *runlog.Log
	// ArtifactsDir is the workspace's artifact area; each run works in
	// ArtifactsDir/<task id>/<run id> and artifact paths never leave it.
	ArtifactsDir string
	// Workspace is the workspace root (ledger attribution).
	Workspace string
	// HeartbeatInterval overrides DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
}

// CallID is the durable base id of a run's LLM call for one turn: built
// from the workflow id, the run's attempt and the turn. The first
// execution of the turn's step has exactly this ledger row; a repeated
// execution (a retried activity after a provider error, a worker killed
// mid-call) is another provider call and gets a row of its own, CallID-r2,
// -r3, ... (LLMTurn sets llm.CallMeta.RowPerExecution; docs/costs.md).
func CallID(ref workflows.RunRef, turn int) string {
	return fmt.Sprintf("%s-a%d-t%d", ref.WorkflowID, ref.Attempt, turn)
}

// RunDir is the work directory of a run.
func RunDir(artifactsDir string, taskID, runID int64) string {
	return filepath.Join(artifactsDir, strconv.FormatInt(taskID, 10), strconv.FormatInt(runID, 10))
}

// TaskRunStart marks the run running (task running, run.started event).
func (a *TaskRunActivities) TaskRunStart(ctx context.Context, ref workflows.RunRef) error {
	_, err := a.Store.MarkRunStarted(ctx, ref.RunID)
	if errors.Is(err, models.ErrNotFound) || errors.Is(err, models.ErrRunNotActive) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return fmt.Errorf("start run %d: %w", ref.RunID, err)
	}
	a.notify()
	return nil
}

// TaskRunFinish records the run's outcome (run and task status, terminal
// event). Repeating it changes nothing.
func (a *TaskRunActivities) TaskRunFinish(ctx context.Context, o models.RunOutcome) error {
	run, applied, err := a.Store.FinishRun(ctx, o)
	if errors.Is(err, models.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return fmt.Errorf("finish run %d: %w", o.RunID, err)
	}
	if applied {
		a.notify()
		if o.Status == models.RunFinished && run != nil {
			a.archiveRun(ctx, run.Snapshot, o.Reply) // memory.go
		}
	}
	return nil
}

// TaskRunWait records that a run parks (waiting for budget, event
// run.waiting) or resumes (run.resumed). Repeating it changes nothing.
func (a *TaskRunActivities) TaskRunWait(ctx context.Context, in workflows.RunWaitInput) error {
	w := models.RunWait{RunID: in.Run.RunID, Attempt: in.Run.Attempt, Turn: in.Turn, WaitingFor: in.WaitingFor, Code: in.Code,
		Reason: in.Reason, Until: in.Until, Waited: in.Waited}
	var err error
	if in.Resume {
		_, err = a.Store.ResumeRun(ctx, w)
	} else {
		_, err = a.Store.ParkRun(ctx, w)
	}
	if errors.Is(err, models.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return fmt.Errorf("record wait of run %d: %w", in.Run.RunID, err)
	}
	a.notify()
	return nil
}

// TaskRunLLMTurn makes one LLM call of a task run through the router
// (admission and settlement included) with a stable call id.
func (a *TaskRunActivities) TaskRunLLMTurn(ctx context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
	stop := a.heartbeat(ctx)
	defer stop()
	capMicros, err := a.costCap(ctx, in.Run)
	if err != nil {
		return nil, err // retried: a turn never runs past a cap it could not read
	}
	resp, err := LLMTurn(ctx, a.Log, a.Router, in, llm.CallMeta{
		CallID:    CallID(in.Run, in.Turn),
		Subject:   in.Run.Subject,
		Workspace: a.Workspace,
		AgentID:   in.Run.AgentID,
		SessionID: in.Run.WorkflowID,
		RunID:     models.TaskRunLedgerID(in.Run.RunID),
		RootRunID: in.Run.RootRunID,
		Source:    llm.SourceTask,
		Trigger:   in.Run.Trigger,
		// Read at every turn: a raised cap counts from the next turn on.
		CostCapMicros: capMicros,
	})
	if err == nil {
		a.turnEvent(ctx, in, resp)
	}
	return resp, err
}

// costCapStore reads a task's cost cap (*models.Store).
type costCapStore interface {
	RunCostCap(ctx context.Context, taskID int64, rootRunID string) (int64, error)
}

// costCap is the max_cost_usd of the run tree's task in micro-dollars (0:
// none).
func (a *TaskRunActivities) costCap(ctx context.Context, ref workflows.RunRef) (int64, error) {
	cs, ok := a.Store.(costCapStore)
	if !ok || ref.TaskID == 0 {
		return 0, nil
	}
	return cs.RunCostCap(ctx, ref.TaskID, ref.RootRunID)
}

// turnEvent appends run.turn for a finished LLM turn (the run's timeline in
// the console): its number, tokens and the names of the tools the model
// asked for; never the text. Once per turn (dedupe key); a failure to
// append it is logged, not retried, since a retry would pay the turn again.
func (a *TaskRunActivities) turnEvent(ctx context.Context, in workflows.LLMTurnInput, resp *llm.Response) {
	if a.Store == nil || resp == nil {
		return
	}
	tools := make([]string, 0, len(resp.ToolCalls))
	for _, c := range resp.ToolCalls {
		tools = append(tools, c.Name)
	}
	payload := map[string]any{"turn": in.Turn, "input_tokens": resp.Usage.InputTokens, "output_tokens": resp.Usage.OutputTokens,
		"tool_calls": tools, "finish_reason": resp.FinishReason}
	ev := models.NewEvent(models.EventRunTurn, fmt.Sprintf("run.turn:%d:t%d", in.Run.RunID, in.Turn), payload)
	ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = in.Run.TaskID, in.Run.RunID, in.Run.AgentID, in.Run.Attempt
	if fresh, err := a.Store.InsertEvent(ctx, &ev); err != nil {
		activity.GetLogger(ctx).Warn("run.turn event not recorded", "run_id", in.Run.RunID, "turn", in.Turn, "err", err)
	} else if fresh {
		a.notify()
	}
}

// LLMTurn is one LLM turn of any durable run: it loads the run's snapshot
// and stored conversation, calls the model once (one retry owner: the
// provider client makes one attempt, Temporal's retry policy repeats the
// activity), stores the answer, and returns it without tool arguments and
// with its text bounded. Every path of a durable turn (task, firing,
// channel, peer, webhook) comes here: each execution that calls the
// provider has a ledger row of its own (meta.CallID is the base id, see
// CallID), and a turn whose answer is stored is never called again.
func LLMTurn(ctx context.Context, log *runlog.Log, router *llm.Router, in workflows.LLMTurnInput, meta llm.CallMeta) (*llm.Response, error) {
	resp, err := llmTurn(ctx, log, router, in, meta)
	if full := storageFull(err); full != nil {
		return nil, full // the run log could not store the turn
	}
	return resp, err
}

func llmTurn(ctx context.Context, log *runlog.Log, router *llm.Router, in workflows.LLMTurnInput, meta llm.CallMeta) (*llm.Response, error) {
	var snap workflows.RunSnapshot
	if err := log.Snapshot(ctx, in.Run.Snapshot, &snap); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	key := in.Run.Key()
	// The answer goes at position in.Messages. When it is there, this turn
	// was answered by an earlier execution of the step whose end Temporal
	// never recorded (a crash; a local activity's lost workflow task): hand
	// that answer back rather than pay the provider again.
	if resp, ok, err := log.Answered(ctx, key, in.Messages); err != nil {
		return nil, err
	} else if ok {
		return lightResponse(resp)
	}
	var msgs, opening []llm.Message
	var err error
	if in.Turn == 1 {
		// The opening messages come from the snapshot; they are stored
		// with the turn's answer, in one write (a retried first turn
		// stores the same rows again).
		if opening, err = openingMessages(snap.Agent, in.Messages); err != nil {
			return nil, err
		}
		msgs = opening
	} else {
		msgs, err = log.Messages(ctx, key, in.Messages)
		if errors.Is(err, runlog.ErrOutOfStep) {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
		}
		if err != nil {
			return nil, err
		}
	}
	ag := snap.Agent
	meta.DataClassification = in.Run.DataClassification
	// A row per provider call: an execution repeated after one that may
	// have reached the provider (interrupted or failed) gets its own.
	meta.RowPerExecution = true
	call := &llm.Call{
		Provider: ag.Provider,
		Model:    ag.Model,
		Request: llm.Request{Model: ag.Model, Messages: msgs, Tools: ag.Tools, ToolChoice: in.ToolChoice, Temperature: ag.Temperature,
			MaxTokens: ag.MaxTokens, PromptCaching: ag.PromptCaching},
		Meta: meta,
	}
	resp, err := router.Do(llm.WithoutRetries(ctx), call)
	if err != nil {
		return nil, LLMStepError(ctx, err)
	}
	// Scrubbed before the run log: every later reader (the loop, the run's
	// result, deliveries, a webhook's reply) takes the answer from there.
	resp = agent.ScrubResponse(resp)
	if err := log.PutTurn(ctx, key, in.Messages-len(opening), opening, resp); err != nil {
		return nil, err
	}
	return lightResponse(resp)
}

// lightResponse is what the workflow gets of a turn's response: no tool
// arguments and the text bounded (the whole answer is in the run log).
func lightResponse(resp *llm.Response) (*llm.Response, error) {
	light := *resp
	light.Content = agent.Summary(resp.Content, workflows.MaxTurnTextBytes)
	light.ToolCalls = make([]llm.ToolCall, len(resp.ToolCalls))
	for i, c := range resp.ToolCalls {
		light.ToolCalls[i] = llm.ToolCall{ID: c.ID, Name: c.Name}
	}
	if len(resp.ToolCalls) == 0 {
		light.ToolCalls = nil
	}
	if err := fitsPayload(&light); err != nil {
		return nil, err
	}
	return &light, nil
}

// openingMessages are the messages a run opens with (system prompt,
// earlier conversation, user text), which must be the n the loop counted.
func openingMessages(in agent.Input, n int) ([]llm.Message, error) {
	var msgs []llm.Message
	if in.SystemPrompt != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: in.SystemPrompt})
	}
	msgs = append(msgs, in.History...)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: in.UserText})
	if len(msgs) != n {
		err := fmt.Errorf("%w: the run opens with %d messages, the workflow counts %d", runlog.ErrOutOfStep, len(msgs), n)
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	return msgs, nil
}

// fitsPayload refuses a step result too large for a run's history.
func fitsPayload(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > workflows.MaxStepPayloadBytes {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("a step result of %d bytes exceeds the limit of %d bytes per step",
			len(b), workflows.MaxStepPayloadBytes), workflows.ErrTypePayloadTooLarge, nil)
	}
	return nil
}

// MaxProviderAttempts is how many attempts an LLM-turn activity makes for
// provider failures that are not throttling (5xx, network) before it gives
// up. Throttling (HTTP 429, a provider's Retry-After, a cost-governance
// rate limit) never gives up: it waits, bounded by the run's own timer.
const MaxProviderAttempts = 5

// LLMStepError turns a failed LLM call inside an activity into the error
// Temporal's retry policy acts on: the provider's Retry-After (or cost
// governance's) becomes the next-retry delay, capped at llm.MaxRetryAfter;
// other transient failures retry with the policy's backoff up to
// MaxProviderAttempts; everything else fails the step at once.
func LLMStepError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // cancelled or timed out by Temporal
	}
	if full := storageFull(err); full != nil {
		return full // cost admission or settlement could not write
	}
	attempt := int32(1)
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	var pe *llm.ProviderError
	if llm.IsRetryable(err) {
		if wait := llm.RetryAfter(err); wait > 0 || (errors.As(err, &pe) && pe.StatusCode == 429) {
			return temporal.NewApplicationErrorWithOptions(err.Error(), workflows.ErrTypeProviderThrottled, temporal.ApplicationErrorOptions{NextRetryDelay: wait})
		}
		if attempt >= MaxProviderAttempts {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%v (gave up after %d attempts)", err, attempt), workflows.ErrTypeLLMRejected, nil)
		}
		return temporal.NewApplicationError(err.Error(), workflows.ErrTypeProvider)
	}
	// A rate limit, quota window or open breaker clears with time: retry
	// when governance says it may succeed (same call id, so one ledger row).
	// A token quota that frees up only later than a retry may wait is a
	// refusal like a hard budget: a task run parks for it (budget waits).
	var rej *costs.Rejection
	if errors.As(err, &rej) && rej.RetryAfter > 0 && !(rej.Code == costs.CodeQuota && rej.RetryAfter > llm.MaxRetryAfter) {
		return temporal.NewApplicationErrorWithOptions(err.Error(), workflows.ErrTypeCostThrottled,
			temporal.ApplicationErrorOptions{NextRetryDelay: min(rej.RetryAfter, llm.MaxRetryAfter)})
	}
	if rej != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeCostRejected, nil, rej.Code)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeLLMRejected, nil)
}

// TaskRunTool runs one tool call in the run's work directory, stores its
// result in the run log and attaches the files it wrote to the task
// (artifact record + run.artifact event, once per tool call even when this
// activity is retried). The workflow gets a summary of the result.
func (a *TaskRunActivities) TaskRunTool(ctx context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
	stop := a.heartbeat(ctx)
	defer stop()
	ref := in.Run
	dir := RunDir(a.ArtifactsDir, ref.TaskID, ref.RunID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agent.ToolResult{}, fmt.Errorf("create work directory of run %d: %w", ref.RunID, err)
	}
	start := time.Now()
	res, err := ToolStep(ctx, a.Log, a.Toolbox, dir, in, func(f agent.ProducedFile) (bool, error) {
		return a.recordArtifact(ctx, ref, dir, in, f)
	}, a.notify)
	if err == nil {
		a.toolEvent(ctx, in, res, time.Since(start))
	}
	return res, err
}

// toolEvent appends run.tool for a finished MCP or skill tool call: which
// tool (and server or skill), whether it was an error result, how long it took.
// Never the arguments or the result text. Once per call (dedupe key), and
// a failure to append it is logged, not retried: a retry would call the
// tool (an MCP server) again.
func (a *TaskRunActivities) toolEvent(ctx context.Context, in workflows.ToolInput, res agent.ToolResult, took time.Duration) {
	if a.Store == nil {
		return
	}
	payload := map[string]any{"tool": in.Name, "is_error": res.IsError, "duration_ms": took.Milliseconds(),
		"turn": in.Turn, "call_id": in.CallID, "idempotency_key": in.IdempotencyKey()}
	if server, tool, ok := mcp.SplitToolName(in.Name); ok {
		payload["kind"], payload["server"], payload["server_tool"] = "mcp", server, tool
	} else if skill, tool, ok := skills.SplitToolName(in.Name); ok {
		payload["kind"], payload["skill"], payload["skill_tool"] = "skill", skill, tool
	} else {
		return // builtins: their files are run.artifact events already
	}
	ev := models.NewEvent(models.EventRunTool, fmt.Sprintf("run.tool:%d:t%d:%s", in.Run.RunID, in.Turn, in.CallID), payload)
	ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = in.Run.TaskID, in.Run.RunID, in.Run.AgentID, in.Run.Attempt
	if fresh, err := a.Store.InsertEvent(ctx, &ev); err != nil {
		activity.GetLogger(ctx).Warn("run.tool event not recorded", "run_id", in.Run.RunID, "tool", in.Name, "err", err)
	} else if fresh {
		a.notify()
	}
}

// ToolStep is one tool call of any durable run: it reads the call from the
// stored assistant message, runs it in dir (the toolbox caps its output),
// stores the result the model will see, reports each produced file to
// record (true: newly recorded; then notify is called once), and returns
// the result with its text reduced to a summary.
func ToolStep(ctx context.Context, log *runlog.Log, tb *agent.Toolbox, dir string, in workflows.ToolInput,
	record func(agent.ProducedFile) (bool, error), notify func()) (agent.ToolResult, error) {
	res, err := toolStep(ctx, log, tb, dir, in, record, notify)
	return res, toolStepError(ctx, err)
}

// toolStepError applies the tool step's retry rules, which the activity
// decides rather than the retry policy: a full database waits for space
// however long it takes; anything else gives up after
// workflows.ToolStepAttempts.
func toolStepError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if full := storageFull(err); full != nil {
		return full
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		return err
	}
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt >= workflows.ToolStepAttempts {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%v (gave up after %d attempts)", err, workflows.ToolStepAttempts), "ToolStepFailed", err)
	}
	return err
}

// storageFull turns an error of a write the database refused for lack of
// space into a step error retried after workflows.StorageFullRetryDelay
// (its text fixed, so no SQL or path reaches the history), else nil.
func storageFull(err error) error {
	if !models.IsStorageFull(err) {
		return nil
	}
	return temporal.NewApplicationErrorWithOptions(models.ErrStorageFull.Error(), workflows.ErrTypeStorageFull,
		temporal.ApplicationErrorOptions{NextRetryDelay: workflows.StorageFullRetryDelay})
}

func toolStep(ctx context.Context, log *runlog.Log, tb *agent.Toolbox, dir string, in workflows.ToolInput,
	record func(agent.ProducedFile) (bool, error), notify func()) (agent.ToolResult, error) {
	var snap workflows.RunSnapshot
	if err := log.Snapshot(ctx, in.Run.Snapshot, &snap); err != nil {
		return agent.ToolResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	key := in.Run.Key()
	asked, err := log.At(ctx, key, in.CallSeq)
	if err != nil {
		return agent.ToolResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	if in.Index >= len(asked.ToolCalls) || asked.ToolCalls[in.Index].ID != in.CallID {
		msg := fmt.Sprintf("%v: message %d of run %s has no tool call %s", runlog.ErrOutOfStep, in.CallSeq, key, in.CallID)
		return agent.ToolResult{}, temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeRunLog, nil)
	}
	call := asked.ToolCalls[in.Index]
	// The step's idempotency key, for tools with side effects to pass on
	// (Idempotency-Key header, MCP _meta, skill environment).
	ctx = drivers.WithIdempotencyKey(ctx, in.IdempotencyKey())
	if snap.Memory != nil {
		ctx = agent.WithMemoryScope(ctx, *snap.Memory)
	}
	var res agent.ToolResult
	if once, ok := pythonRerun(ctx, call.Name); ok {
		res = once // interrupted twice: not run a third time
	} else if res, err = tb.Execute(ctx, dir, snap.Builtins, call); err != nil {
		return agent.ToolResult{}, err
	}
	if err := log.Put(ctx, key, in.ResultSeq, llm.Message{Role: llm.RoleTool, Content: agent.ToolMessageContent(res), ToolCallID: call.ID, Name: call.Name}); err != nil {
		return agent.ToolResult{}, err
	}
	fresh := false
	for _, f := range res.Files {
		rec, err := record(f)
		if err != nil {
			return agent.ToolResult{}, err
		}
		fresh = fresh || rec
	}
	if fresh {
		notify()
	}
	res.Content = agent.Summary(res.Content, workflows.ToolSummaryBytes)
	if err := fitsPayload(res); err != nil {
		return agent.ToolResult{}, err
	}
	return res, nil
}

func (a *TaskRunActivities) recordArtifact(ctx context.Context, ref workflows.RunRef, dir string, in workflows.ToolInput, f agent.ProducedFile) (bool, error) {
	area, err := filepath.EvalSymlinks(a.ArtifactsDir)
	if err != nil {
		return false, fmt.Errorf("artifact area: %w", err)
	}
	path, err := filepath.EvalSymlinks(f.Path)
	if err != nil {
		return false, fmt.Errorf("artifact %s: %w", f.Path, err)
	}
	if !Inside(area, path) {
		// The toolbox confines writes to the work directory, so this is
		// a bug or a race with a symlink: never record such a path.
		return false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tool %s wrote %s, outside the artifact area", f.Tool, f.Path), workflows.ErrTypeArtifactOutsideArea, nil)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, fmt.Errorf("work directory: %w", err)
	}
	name, err := filepath.Rel(realDir, path)
	if err != nil || strings.HasPrefix(name, "..") {
		name = filepath.Base(path)
	}
	size := f.SizeBytes
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	_, fresh, err := a.Store.RecordArtifact(ctx, models.NewArtifact{
		RunID: ref.RunID, Path: path, Name: filepath.ToSlash(name), SizeBytes: size, Tool: f.Tool,
		DedupeKey: fmt.Sprintf("run.artifact:%d:t%d:%s:%s", ref.RunID, in.Turn, in.CallID, path),
	})
	if errors.Is(err, models.ErrNotFound) {
		return false, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return false, fmt.Errorf("record artifact %s: %w", name, err)
	}
	return fresh, nil
}

// Inside reports whether path is root or below it (both already cleaned
// and free of symlinks).
func Inside(root, path string) bool {
	root, path = filepath.Clean(root), filepath.Clean(path)
	return path == root || strings.HasPrefix(path, root+string(filepath.Separator))
}

func (a *TaskRunActivities) notify() {
	if a.Events != nil {
		a.Events.Notify()
	}
}

// heartbeat reports liveness while a long call runs, so Temporal notices a
// crashed worker after the heartbeat timeout (not the whole start-to-close
// timeout) and delivers cancellation to the call. Outside an activity (unit
// tests) it does nothing.
func (a *TaskRunActivities) heartbeat(ctx context.Context) (stop func()) {
	return heartbeat(ctx, a.HeartbeatInterval)
}

// heartbeat records an activity heartbeat every interval (0:
// DefaultHeartbeatInterval) until stop is called.
func heartbeat(ctx context.Context, every time.Duration) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	if every <= 0 {
		every = DefaultHeartbeatInterval
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
