package taskruns

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/internal/runprep"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// starts is a Temporal client that records the TaskRun starts.
type starts struct {
	client.Client
	inputs []workflows.TaskRunInput
}

type started struct{ client.WorkflowRun }

func (started) GetRunID() string { return "temporal-run" }

func (s *starts) ExecuteWorkflow(_ context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	s.inputs = append(s.inputs, args[0].(workflows.TaskRunInput))
	return started{}, nil
}

func newService(t *testing.T) (*Service, *starts) {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	store, err := models.Open(ctx, models.Options{DSN: filepath.Join(dir, "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	agents := filepath.Join(dir, "agents")
	os.MkdirAll(agents, 0o755)
	os.WriteFile(filepath.Join(agents, "good.yaml"), []byte("id: good\nsystem_prompt: You work.\nbuiltins: [read_file]\n"), 0o644)
	os.WriteFile(filepath.Join(agents, "bad.yaml"), []byte("id: bad\nllm: {provider: nope}\n"), 0o644)
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.LLM.Providers = map[string]config.ProviderConfig{"ollama": {Type: "ollama", DefaultModel: "m"}}
	cfg.LLM.DefaultProvider = "ollama"
	tc := &starts{}
	return &Service{Client: tc, Store: store, Agents: agentdef.NewRegistry([]string{agents}, nil),
		Router: llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama"), Toolbox: agent.NewToolbox(netguard.Policy{}, 5*time.Second),
		Config: cfg, Log: &runlog.Log{Store: store, BlobDir: filepath.Join(dir, "blobs")}}, tc
}

func newTask(t *testing.T, s *Service, agentID string) *models.Task {
	t.Helper()
	title := "Write the report"
	task, err := s.Store.(models.WorkboardStore).CreateTask(context.Background(), models.TaskFields{Title: &title, AgentID: &agentID})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// A run's snapshot is the agent resolved for the requester, with the
// skills' instructions and the task as the prompt; the run and its
// workflow input carry its hash.
func TestStartSnapshotsTheResolvedAgent(t *testing.T) {
	s, tc := newService(t)
	task := newTask(t, s, "good")
	who := &auth.Principal{Subject: "alice", Role: auth.RoleMember}
	run, err := s.Start(auth.WithPrincipal(context.Background(), who), task.ID, workflows.TriggerAPI)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := s.Agents.Get("good")
	set, err := chat.Resolve(&s.Config.Config, s.Router, def, s.Toolbox.Tools(def), nil, who)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Log.PutSnapshot(context.Background(), workflows.RunSnapshot{Builtins: def.ToolGrants(), Agent: agent.Input{
		Provider: set.Provider, Model: set.Model, SystemPrompt: s.Toolbox.SystemPrompt(def), UserText: TaskPrompt(task),
		Tools: set.Tools, ToolChoice: set.ToolChoice, Temperature: set.Temperature, MaxTokens: set.MaxTokens,
		MaxTurns: set.MaxTurns, PromptCaching: set.Caching,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Snapshot != want || len(tc.inputs) != 1 || tc.inputs[0].Snapshot != want || tc.inputs[0].Subject != "alice" {
		t.Fatalf("run snapshot %q, inputs %+v; want %q", run.Snapshot, tc.inputs, want)
	}
}

// An agent whose settings do not resolve is refused with the resolver's
// own error (400 on the field it names); nothing is queued.
func TestStartRefusesAnUnresolvedAgent(t *testing.T) {
	s, tc := newService(t)
	task := newTask(t, s, "bad")
	_, err := s.Start(context.Background(), task.ID, workflows.TriggerAPI)
	def, _ := s.Agents.Get("bad")
	_, rerr := chat.Resolve(&s.Config.Config, s.Router, def, s.Toolbox.Tools(def), nil, nil)
	var wrapped *runprep.ResolveError
	if err == nil || rerr == nil || err.Error() != rerr.Error() || errors.As(err, &wrapped) {
		t.Fatalf("err = %T %v, want the resolver's own error %v", err, err, rerr)
	}
	if len(tc.inputs) != 0 {
		t.Fatal("a workflow was started")
	}
	if _, err := s.Store.ActiveRun(context.Background(), task.ID); err == nil {
		t.Fatal("a run was queued")
	}
}
