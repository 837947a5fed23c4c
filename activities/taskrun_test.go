package activities

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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
	return &fixture{
		acts: &TaskRunActivities{Store: store, Router: router, Toolbox: agent.NewToolbox(netguard.Policy{}, 5*time.Second),
			Events: note, ArtifactsDir: area, Workspace: dir},
		store: store, note: note,
		ref: workflows.RunRef{TaskID: task.ID, RunID: run.ID, Attempt: run.Attempt, AgentID: agentID, WorkflowID: "task-1", Trigger: "api"},
	}
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
	in := workflows.ToolInput{Run: f.ref, Builtins: []string{"write_file"}, Invocation: agent.ToolInvocation{Turn: 1,
		Call: llm.ToolCall{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"docs/a.md","content":"hello"}`)}}}
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
	in.Invocation.Turn, in.Invocation.Call.ID = 2, "c2"
	in.Invocation.Call.Arguments = json.RawMessage(`{"path":"docs/a.md","content":"hello again"}`)
	if _, err := f.acts.TaskRunTool(ctx, in); err != nil {
		t.Fatal(err)
	}
	arts, total, _, _ = f.store.ListArtifacts(ctx, f.ref.TaskID, models.Page{})
	if total != 1 || arts[0].SizeBytes != 11 || len(f.events(t, models.EventRunArtifact)) != 2 {
		t.Fatalf("rewrite: %+v, %d events", arts, len(f.events(t, models.EventRunArtifact)))
	}

	// Escapes are refused by the toolbox (an error result), nothing recorded.
	in.Invocation.Call.Arguments = json.RawMessage(`{"path":"../../../../etc/x","content":"no"}`)
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
	turn := func(text string) (*llm.Response, error) {
		return f.acts.TaskRunLLMTurn(context.Background(), workflows.LLMTurnInput{Run: f.ref, Turn: agent.TurnRequest{Turn: 1, Provider: "ollama",
			Request: llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}}})
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
	if got := CallID(f.ref, 3); got != "task-1-a1-t3" {
		t.Fatalf("call id %q", got)
	}
}

// throttlingGate rejects every call the way cost governance rejects a call
// that may pass later (a rate limit with Retry-After).
type throttlingGate struct{ code string }

func (g throttlingGate) Admit(context.Context, *llm.Call) (llm.Admission, error) {
	if g.code == costs.CodeRateLimited {
		return nil, &costs.Rejection{Code: g.code, Message: "rate limited", RetryAfter: 2 * time.Second}
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
		_, err := f.acts.TaskRunLLMTurn(context.Background(), workflows.LLMTurnInput{Run: f.ref, Turn: agent.TurnRequest{Turn: 1, Provider: "ollama",
			Request: llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}}})
		return err
	}
	var app *temporal.ApplicationError
	router.SetGate(throttlingGate{code: costs.CodeRateLimited})
	if err := turn(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeCostThrottled || app.NonRetryable() || app.NextRetryDelay() != 2*time.Second {
		t.Fatalf("throttled: %v", err)
	}
	router.SetGate(throttlingGate{code: costs.CodeBudgetExceeded})
	if err := turn(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeLLMRejected || !app.NonRetryable() {
		t.Fatalf("budget: %v", err)
	}
}
