package activities

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// agentMap is an agent registry in memory.
type agentMap map[string]*agentdef.Definition

func (m agentMap) Get(id string) (*agentdef.Definition, bool) { d, ok := m[id]; return d, ok }

// prepDeps are what the prepare steps of firings and webhook runs stand
// on: a store, the run log, a router with one provider (ollama, model m).
type prepDeps struct {
	store   *models.Store
	log     *runlog.Log
	cfg     *config.Loaded
	router  *llm.Router
	toolbox *agent.Toolbox
	agents  agentMap
}

func newPrepDeps(t *testing.T) *prepDeps {
	t.Helper()
	dir := t.TempDir()
	store, err := models.Open(context.Background(), models.Options{DSN: filepath.Join(dir, "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.LLM.Providers = map[string]config.ProviderConfig{"ollama": {Type: "ollama", DefaultModel: "m"}}
	cfg.LLM.DefaultProvider = "ollama"
	enabled := true
	return &prepDeps{store: store, log: &runlog.Log{Store: store, BlobDir: filepath.Join(dir, "blobs")}, cfg: cfg,
		router: llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama"), toolbox: agent.NewToolbox(netguard.Policy{}, 5*time.Second),
		agents: agentMap{
			"good": {ID: "good", Enabled: &enabled, SystemPrompt: "You help.", Builtins: []string{"read_file"}, Schedule: &agentdef.Schedule{Prompt: "Report."},
				LLM: agentdef.LLMSettings{DataClassification: "internal"}},
			"bad": {ID: "bad", Enabled: &enabled, Schedule: &agentdef.Schedule{}, LLM: agentdef.LLMSettings{Provider: "nope"}},
		}}
}

// snapshotOf is the snapshot hash of the agent as a run resolves it, built
// here step by step as the prepare steps built it before runprep.
func (d *prepDeps) snapshotOf(t *testing.T, def *agentdef.Definition, who *auth.Principal, user string, history []llm.Message) string {
	t.Helper()
	set, err := chat.Resolve(&d.cfg.Config, d.router, def, d.toolbox.Tools(def), nil, who)
	if err != nil {
		t.Fatal(err)
	}
	sha, err := d.log.PutSnapshot(context.Background(), workflows.RunSnapshot{Builtins: def.ToolGrants(), Agent: agent.Input{
		Provider: set.Provider, Model: set.Model, SystemPrompt: def.SystemPrompt, History: history, UserText: user,
		Tools: set.Tools, ToolChoice: set.ToolChoice, Temperature: set.Temperature, MaxTokens: set.MaxTokens,
		MaxTurns: set.MaxTurns, PromptCaching: set.Caching,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

func TestFiringPrepareSnapshotsTheAgent(t *testing.T) {
	d := newPrepDeps(t)
	a := &ScheduledActivities{Agents: d.agents, Store: d.store, Config: d.cfg, Router: d.router, Toolbox: d.toolbox, Log: d.log}
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	prep, err := a.prepare(context.Background(), workflows.ScheduledAgentInput{AgentID: "good", ScheduleID: "s", Trigger: "schedule"}, "wf-1", at)
	if err != nil {
		t.Fatal(err)
	}
	who := &auth.Principal{Subject: ScheduledSubject("good"), Role: auth.RoleMember, Method: "schedule"}
	want := d.snapshotOf(t, d.agents["good"], who, "Report.", nil)
	if prep.Status != models.ScheduleRunRunning || prep.Run.Snapshot != want || prep.Run.Subject != who.Subject ||
		prep.Run.DataClassification != "internal" || prep.Agent.Model != "m" {
		t.Fatalf("prepared %+v, want snapshot %s", prep, want)
	}

	// An agent that does not resolve skips the firing, naming why.
	prep, err = a.prepare(context.Background(), workflows.ScheduledAgentInput{AgentID: "bad"}, "wf-2", at)
	_, rerr := chat.Resolve(&d.cfg.Config, d.router, d.agents["bad"], nil, nil, who)
	if err != nil || prep.Status != models.ScheduleRunSkipped || rerr == nil || prep.Error != "agent bad cannot run: "+rerr.Error() {
		t.Fatalf("unresolved agent: %+v %v", prep, err)
	}
}

func TestWebhookRunPrepareSnapshotsTheAgentWithTheConversation(t *testing.T) {
	d := newPrepDeps(t)
	ch := &chat.Service{Config: d.cfg, Router: d.router, Store: d.store, Toolbox: d.toolbox}
	a := &WebhookRunActivities{Config: d.cfg, Chat: ch, Agents: d.agents, Store: d.store, Router: d.router, Toolbox: d.toolbox, Log: d.log}
	ctx := context.Background()
	in := workflows.WebhookRunInput{RunID: "wr_1", AgentID: "good", Subject: "hook", SessionID: "sess", Text: "ping"}
	prep, err := a.WebhookRunPrepare(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	history, err := ch.History(ctx, "sess")
	if err != nil {
		t.Fatal(err)
	}
	who := &auth.Principal{Subject: "hook", Role: auth.RoleMember, Method: "webhook"}
	if want := d.snapshotOf(t, d.agents["good"], who, "ping", history); prep.Run.Snapshot != want || prep.Run.WorkflowID != "webhook-wr_1" {
		t.Fatalf("prepared %+v, want snapshot %s", prep, want)
	}

	// An agent that does not resolve ends the run: not retried.
	in.RunID, in.AgentID = "wr_2", "bad"
	_, err = a.WebhookRunPrepare(ctx, in)
	var app *temporal.ApplicationError
	_, rerr := chat.Resolve(&d.cfg.Config, d.router, d.agents["bad"], nil, nil, who)
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeLLMRejected || !app.NonRetryable() || rerr == nil || app.Message() != rerr.Error() {
		t.Fatalf("unresolved agent: %v", err)
	}
}
