package activities

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

type countingNotifier struct{ n atomic.Int64 }

func (c *countingNotifier) Notify() { c.n.Add(1) }

// fixture is a store with one task and its queued run, and the activities
// over them.
type fixture struct {
	acts  *TaskRunActivities
	store *models.Store
	note  *countingNotifier
	ref   workflows.RunRef
}

func newFixture(t *testing.T, router *llm.Router) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := models.Open(ctx, models.Options{DSN: filepath.Join(dir, "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	title, agentID := "t", "writer"
	task, err := store.CreateTask(ctx, models.TaskFields{Title: &title, AgentID: &agentID})
	if err != nil {
		t.Fatal(err)
	}
	run, err := store.CreateRun(ctx, models.NewRun{TaskID: task.ID, AgentID: agentID, Trigger: "api", WorkflowID: "task-1"})
	if err != nil {
		t.Fatal(err)
	}
	area := filepath.Join(dir, "artifacts")
	os.MkdirAll(area, 0o755)
	note := &countingNotifier{}
	log := &runlog.Log{Store: store, BlobDir: filepath.Join(dir, "blobs"), InlineBytes: 64}
	f := &fixture{
		acts: &TaskRunActivities{Store: store, Router: router, Toolbox: agent.NewToolbox(netguard.Policy{}, 5*time.Second),
			Events: note, ArtifactsDir: area, Workspace: dir, Log: log},
		store: store, note: note,
		ref: workflows.RunRef{TaskID: task.ID, RunID: run.ID, Attempt: run.Attempt, AgentID: agentID, WorkflowID: "task-1", Trigger: "api"},
	}
	f.ref.Snapshot = f.snapshot(t, "hi")
	return f
}

// snapshot stores the run's agent (ollama, model m, file tools) asking
// text, and returns its hash.
func (f *fixture) snapshot(t *testing.T, text string) string {
	t.Helper()
	sha, err := f.acts.Log.PutSnapshot(context.Background(), workflows.RunSnapshot{Builtins: []string{"write_file", "read_file"},
		Agent: agent.Input{Provider: "ollama", Model: "m", UserText: text, MaxTurns: 4}})
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

// turn runs the first LLM turn of a run asking text.
func (f *fixture) turn(t *testing.T, text string) (*llm.Response, error) {
	ref := f.ref
	ref.Snapshot = f.snapshot(t, text)
	return f.acts.TaskRunLLMTurn(context.Background(), workflows.LLMTurnInput{Run: ref, Turn: 1, Messages: 1})
}

// askTool stores an assistant message at seq asking for call and returns
// the step that runs it (result at seq+1).
func (f *fixture) askTool(t *testing.T, turn, seq int, call llm.ToolCall) workflows.ToolInput {
	t.Helper()
	if err := f.acts.Log.Put(context.Background(), f.ref.Key(), seq, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}); err != nil {
		t.Fatal(err)
	}
	return workflows.ToolInput{Run: f.ref, Turn: turn, CallSeq: seq, Index: 0, ResultSeq: seq + 1, CallID: call.ID, Name: call.Name}
}

func (f *fixture) events(t *testing.T, typ string) []models.Event {
	t.Helper()
	evs, err := f.store.EventsAfter(context.Background(), 0, models.EventFilter{TypePrefixes: []string{typ}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestStartAndFinishAreIdempotent(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	for range 2 {
		if err := f.acts.TaskRunStart(ctx, f.ref); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.events(t, models.EventRunStarted)); n != 1 {
		t.Fatalf("run.started events: %d", n)
	}
	out := models.RunOutcome{RunID: f.ref.RunID, Status: models.RunFinished, Turns: 1}
	for range 2 {
		if err := f.acts.TaskRunFinish(ctx, out); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.events(t, models.EventRunFinished)); n != 1 {
		t.Fatalf("run.finished events: %d", n)
	}
	err := f.acts.TaskRunStart(ctx, f.ref)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeRunGone || !app.NonRetryable() {
		t.Fatalf("start after finish: %v", err)
	}
	if f.note.n.Load() == 0 {
		t.Fatal("subscribers were never woken")
	}
}

func TestToolRecordsArtifactsOncePerCall(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.acts.TaskRunStart(ctx, f.ref); err != nil {
		t.Fatal(err)
	}
	in := f.askTool(t, 1, 2, llm.ToolCall{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"docs/a.md","content":"hello"}`)})
	// The same call twice: a retried activity.
	for range 2 {
		res, err := f.acts.TaskRunTool(ctx, in)
		if err != nil || res.IsError || len(res.Files) != 1 {
			t.Fatalf("tool: %+v %v", res, err)
		}
	}
	arts, total, _, err := f.store.ListArtifacts(ctx, f.ref.TaskID, models.Page{})
	if err != nil || total != 1 {
		t.Fatalf("artifacts %d %v", total, err)
	}
	a := arts[0]
	want := filepath.Join(RunDir(f.acts.ArtifactsDir, f.ref.TaskID, f.ref.RunID), "docs", "a.md")
	wantReal, _ := filepath.EvalSymlinks(want)
	if a.Path != wantReal || a.Name != "docs/a.md" || a.SizeBytes != 5 || a.Tool != "write_file" || a.RunID != f.ref.RunID {
		t.Fatalf("artifact %+v (want path %s)", a, wantReal)
	}
	if n := len(f.events(t, models.EventRunArtifact)); n != 1 {
		t.Fatalf("run.artifact events: %d", n)
	}

	// A second call writing the same file is a new occurrence: one more
	// event, still one record (with the new size).
	in = f.askTool(t, 2, 4, llm.ToolCall{ID: "c2", Name: "write_file", Arguments: json.RawMessage(`{"path":"docs/a.md","content":"hello again"}`)})
	if _, err := f.acts.TaskRunTool(ctx, in); err != nil {
		t.Fatal(err)
	}
	arts, total, _, _ = f.store.ListArtifacts(ctx, f.ref.TaskID, models.Page{})
	if total != 1 || arts[0].SizeBytes != 11 || len(f.events(t, models.EventRunArtifact)) != 2 {
		t.Fatalf("rewrite: %+v, %d events", arts, len(f.events(t, models.EventRunArtifact)))
	}

	// Escapes are refused by the toolbox (an error result), nothing recorded.
	in = f.askTool(t, 3, 6, llm.ToolCall{ID: "c3", Name: "write_file", Arguments: json.RawMessage(`{"path":"../../../../etc/x","content":"no"}`)})
	res, err := f.acts.TaskRunTool(ctx, in)
	if err != nil || !res.IsError || len(res.Files) != 0 {
		t.Fatalf("escape: %+v %v", res, err)
	}
	if _, total, _, _ = f.store.ListArtifacts(ctx, f.ref.TaskID, models.Page{}); total != 1 {
		t.Fatalf("escape recorded an artifact: %d", total)
	}
}

func TestInside(t *testing.T) {
	for _, c := range []struct {
		root, path string
		want       bool
	}{
		{"/ws/artifacts", "/ws/artifacts/1/2/a.md", true},
		{"/ws/artifacts", "/ws/artifacts", true},
		{"/ws/artifacts", "/ws/artifacts-other/a", false},
		{"/ws/artifacts", "/ws/artifacts/../secret", false},
		{"/ws/artifacts", "/etc/passwd", false},
	} {
		if got := Inside(c.root, c.path); got != c.want {
			t.Errorf("Inside(%s, %s) = %v", c.root, c.path, got)
		}
	}
}

func TestLLMTurnClassifiesErrors(t *testing.T) {
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "bad", Status: 400, Message: "no such model"},
		fakellm.Rule{Contains: "busy", Status: 503, Message: "overloaded"},
	)
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: fake.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama"))
	first := f.ref
	turn := func(text string) (*llm.Response, error) {
		f.ref.Attempt++ // a run of its own: an answered turn of the same run is handed back
		return f.turn(t, text)
	}
	resp, err := turn("hello")
	if err != nil || !strings.Contains(resp.Content, "hello") {
		t.Fatalf("ok turn: %+v %v", resp, err)
	}
	var app *temporal.ApplicationError
	if _, err := turn("bad"); !errors.As(err, &app) || app.Type() != workflows.ErrTypeLLMRejected || !app.NonRetryable() ||
		!strings.Contains(app.Message(), "no such model") {
		t.Fatalf("400: %v", err)
	}
	if _, err := turn("busy"); !errors.As(err, &app) || app.Type() != workflows.ErrTypeProvider || app.NonRetryable() {
		t.Fatalf("503: %v", err)
	}
	if got := CallID(first, 3); got != "task-1-a1-t3" {
		t.Fatalf("call id %q", got)
	}
}

// throttlingGate rejects every call the way cost governance rejects a call
// that may pass later (a rate limit with Retry-After).
type throttlingGate struct {
	code  string
	retry time.Duration
}

func (g throttlingGate) Admit(context.Context, *llm.Call) (llm.Admission, error) {
	if g.code == costs.CodeRateLimited {
		return nil, &costs.Rejection{Code: g.code, Message: "rate limited", RetryAfter: 2 * time.Second}
	}
	if g.code == costs.CodeQuota {
		return nil, &costs.Rejection{Code: g.code, Message: "token quota", RetryAfter: g.retry}
	}
	return nil, &costs.Rejection{Code: g.code, Message: "budget exceeded"}
}

func TestLLMTurnRetriesThrottledCallsAfterRetryAfter(t *testing.T) {
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: "http://127.0.0.1:1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	router := llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama")
	f := newFixture(t, router)
	turn := func() error {
		_, err := f.turn(t, "hi")
		return err
	}
	var app *temporal.ApplicationError
	router.SetGate(throttlingGate{code: costs.CodeRateLimited})
	if err := turn(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeCostThrottled || app.NonRetryable() || app.NextRetryDelay() != 2*time.Second {
		t.Fatalf("throttled: %v", err)
	}
	router.SetGate(throttlingGate{code: costs.CodeBudgetExceeded})
	var code string
	if err := turn(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeCostRejected || !app.NonRetryable() || app.Details(&code) != nil || code != costs.CodeBudgetExceeded {
		t.Fatalf("budget: %v (code %q)", err, code)
	}
	// A token quota that frees up soon is throttling; one that frees up
	// only hours later is a refusal a task run waits out (budget waits).
	router.SetGate(throttlingGate{code: costs.CodeQuota, retry: 10 * time.Second})
	if err := turn(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeCostThrottled || app.NextRetryDelay() != 10*time.Second {
		t.Fatalf("short quota wait: %v", err)
	}
	router.SetGate(throttlingGate{code: costs.CodeQuota, retry: 3 * time.Hour})
	if err := turn(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeCostRejected || !app.NonRetryable() || app.Details(&code) != nil || code != costs.CodeQuota {
		t.Fatalf("quota: %v (code %q)", err, code)
	}
}

// TestLLMTurnAnsweredIsNotPaidAgain: a turn whose answer is already in the
// run log (the step ran but its end was never recorded: a crash, a local
// activity's lost workflow task) hands that answer back without asking the
// provider; a later turn likewise. An answer stored by an older gateway,
// without the response kept beside it, is asked again as before.
func TestLLMTurnAnsweredIsNotPaidAgain(t *testing.T) {
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "Done."},
		fakellm.Rule{Contains: "write it", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "a.md", "content": "a"})}},
	)
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama"))
	ctx := context.Background()
	first, err := f.turn(t, "write it")
	if err != nil || len(first.ToolCalls) != 1 || first.Usage.InputTokens == 0 || first.FinishReason == "" {
		t.Fatalf("first turn: %+v %v", first, err)
	}
	again, err := f.turn(t, "write it")
	if err != nil || !reflect.DeepEqual(first, again) {
		t.Fatalf("the turn run again answered %+v (%v), the first time %+v", again, err, first)
	}
	if fake.CallCount() != 1 {
		t.Fatalf("provider asked %d times for one turn", fake.CallCount())
	}

	ref := f.ref
	ref.Snapshot = f.snapshot(t, "write it")
	if _, err := f.acts.TaskRunTool(ctx, workflows.ToolInput{Run: ref, Turn: 1, CallSeq: 1, ResultSeq: 2, CallID: first.ToolCalls[0].ID, Name: "write_file"}); err != nil {
		t.Fatal(err)
	}
	second := workflows.LLMTurnInput{Run: ref, Turn: 2, Messages: 3}
	for i := 0; i < 2; i++ {
		if resp, err := f.acts.TaskRunLLMTurn(ctx, second); err != nil || resp.Content != "Done." {
			t.Fatalf("second turn: %+v %v", resp, err)
		}
	}
	if fake.CallCount() != 2 {
		t.Fatalf("provider asked %d times for two turns", fake.CallCount())
	}

	// An older gateway stored the answer without the response.
	ref.Attempt++
	if err := f.acts.Log.PutFrom(ctx, ref.Key(), 0, llm.Message{Role: llm.RoleUser, Content: "write it"},
		llm.Message{Role: llm.RoleAssistant, Content: "stored before"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.acts.TaskRunLLMTurn(ctx, workflows.LLMTurnInput{Run: ref, Turn: 1, Messages: 1}); err != nil || fake.CallCount() != 3 {
		t.Fatalf("an answer without its response kept was not asked again (%d calls, %v)", fake.CallCount(), err)
	}
}

// TestLLMTurnLeavesRetriesToTemporal: the provider client inside the
// activity makes one attempt (even when its config allows retries), a 429
// hands its Retry-After (capped at 30 s) to Temporal as the next-retry
// delay, and a 5xx is retryable with the policy's backoff.
func TestLLMTurnLeavesRetriesToTemporal(t *testing.T) {
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "slow down", Status: 429, RetryAfter: "120", Message: "rate limited"},
		fakellm.Rule{Contains: "busy", Status: 503, Message: "overloaded"},
	)
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: fake.URL(), MaxRetries: 4})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama"))
	turn := func(text string) error {
		_, err := f.turn(t, text)
		return err
	}
	var app *temporal.ApplicationError
	if err := turn("slow down"); !errors.As(err, &app) || app.Type() != workflows.ErrTypeProviderThrottled || app.NonRetryable() ||
		app.NextRetryDelay() != llm.MaxRetryAfter {
		t.Fatalf("429: %v (next retry %v)", err, app.NextRetryDelay())
	}
	if fake.CallCount() != 1 {
		t.Fatalf("provider called %d times inside one activity attempt, want 1", fake.CallCount())
	}
	if err := turn("busy"); !errors.As(err, &app) || app.Type() != workflows.ErrTypeProvider || app.NonRetryable() || app.NextRetryDelay() != 0 {
		t.Fatalf("503: %v", err)
	}
	if fake.CallCount() != 2 {
		t.Fatalf("provider called %d times, want 2", fake.CallCount())
	}
}

// TestStepsKeepTheConversationInTheRunLog: a turn stores the model's
// answer (tool arguments included) in the run log and hands the workflow
// the call without its arguments; the tool step reads the arguments from
// the log, stores the full (capped) result there and hands back a summary.
// A 300 KiB tool result never reaches the workflow.
func TestStepsKeepTheConversationInTheRunLog(t *testing.T) {
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	big := strings.Repeat("x", 300<<10)
	fake.Script(fakellm.Rule{Contains: "write it", ToolCalls: []fakellm.ToolCall{
		fakellm.NewToolCall("write_file", map[string]string{"path": "big.txt", "content": big})}})
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama"))
	ctx := context.Background()
	resp, err := f.turn(t, "write it")
	if err != nil || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != nil {
		t.Fatalf("turn: %+v %v (the workflow must not get the arguments)", resp, err)
	}
	stored, err := f.acts.Log.At(ctx, f.ref.Key(), 1)
	if err != nil || len(stored.ToolCalls) != 1 || !strings.Contains(string(stored.ToolCalls[0].Arguments), big) {
		t.Fatalf("stored answer: %v", err)
	}
	res, err := f.acts.TaskRunTool(ctx, workflows.ToolInput{Run: f.ref, Turn: 1, CallSeq: 1, ResultSeq: 2, CallID: resp.ToolCalls[0].ID, Name: "write_file"})
	if err != nil || res.IsError || len(res.Files) != 1 {
		t.Fatalf("write: %+v %v", res, err)
	}
	read := f.askTool(t, 2, 3, llm.ToolCall{ID: "r1", Name: "read_file", Arguments: json.RawMessage(`{"path":"big.txt"}`)})
	res, err = f.acts.TaskRunTool(ctx, read)
	if err != nil || len(res.Content) > workflows.ToolSummaryBytes+32 {
		t.Fatalf("read: %d bytes to the workflow, %v", len(res.Content), err)
	}
	msgs, err := f.acts.Log.Messages(ctx, f.ref.Key(), 5)
	if err != nil {
		t.Fatal(err)
	}
	got := msgs[4].Content
	if len(got) > agent.DefaultToolOutputCap+200 || !strings.Contains(got, "[truncated: the tool returned 307200 bytes") {
		t.Fatalf("stored tool result: %d bytes, tail %q", len(got), got[len(got)-120:])
	}
	if _, err := f.acts.Log.Messages(ctx, f.ref.Key(), 7); !errors.Is(err, runlog.ErrOutOfStep) {
		t.Fatalf("reading past the stored conversation: %v", err)
	}
}
