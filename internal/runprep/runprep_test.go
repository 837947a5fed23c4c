package runprep_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/runprep"
	"github.com/agentryhq/agentry/internal/skills"
)

// snapshots is a SnapshotStore in memory that keeps what it was given.
type snapshots struct {
	put  []string
	fail error
}

func (s *snapshots) PutSnapshot(_ context.Context, v any) (string, error) {
	if s.fail != nil {
		return "", s.fail
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s.put = append(s.put, string(b))
	return "sha-" + string(rune('0'+len(s.put))), nil
}

func preparer(t *testing.T, log runprep.SnapshotStore) runprep.Preparer {
	t.Helper()
	p, err := llm.NewProvider("ollama", llm.ProviderConfig{Type: "ollama", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Loaded{}
	cfg.LLM.Providers = map[string]config.ProviderConfig{"ollama": {Type: "ollama", DefaultModel: "m1"}}
	cfg.LLM.DefaultProvider = "ollama"
	return runprep.Preparer{Config: cfg, Router: llm.NewRouter(map[string]llm.Provider{"ollama": p}, "ollama"),
		Toolbox: agent.NewToolbox(netguard.Policy{}, 10*time.Second), Log: log}
}

var who = &auth.Principal{Subject: "tester", Role: auth.RoleMember}

func TestPrepareStoresTheResolvedAgent(t *testing.T) {
	log := &snapshots{}
	def := &agentdef.Definition{ID: "a", SystemPrompt: "You help.", Builtins: []string{"read_file"}, MaxTurns: 3}
	prep, err := preparer(t, log).Prepare(context.Background(), runprep.Request{Agent: def, Who: who, UserText: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if prep.SHA != "sha-1" || len(log.put) != 1 {
		t.Fatalf("stored %d snapshots, sha %q", len(log.put), prep.SHA)
	}
	in := prep.Snapshot.Agent
	if in.Provider != "ollama" || in.Model != "m1" || in.SystemPrompt != "You help." || in.UserText != "hello" || in.MaxTurns != 3 || in.History != nil {
		t.Fatalf("snapshot agent = %+v", in)
	}
	if len(in.Tools) != 1 || in.Tools[0].Name != "read_file" || len(prep.Snapshot.Builtins) != 1 {
		t.Fatalf("tools %v, grants %v", in.Tools, prep.Snapshot.Builtins)
	}
	// What is stored is the snapshot returned: the hash names that value.
	want, _ := json.Marshal(prep.Snapshot)
	if log.put[0] != string(want) {
		t.Fatalf("stored %s, returned %s", log.put[0], want)
	}
}

func TestPrepareReportsAnUnresolvedAgentAndStoresNothing(t *testing.T) {
	log := &snapshots{}
	historyRead := false
	def := &agentdef.Definition{ID: "a", LLM: agentdef.LLMSettings{Provider: "nope"}}
	_, err := preparer(t, log).Prepare(context.Background(), runprep.Request{Agent: def, Who: who, UserText: "x",
		History: func(context.Context) ([]llm.Message, error) { historyRead = true; return nil, nil }})
	var re *runprep.ResolveError
	if !errors.As(err, &re) || re.Err == nil || err.Error() != re.Err.Error() || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want a ResolveError carrying the resolver's message", err)
	}
	if len(log.put) != 0 || historyRead {
		t.Fatalf("an unresolved agent stored %d snapshots, read history %v", len(log.put), historyRead)
	}
}

func TestPrepareLoadsHistoryAfterResolving(t *testing.T) {
	log := &snapshots{}
	def := &agentdef.Definition{ID: "a"}
	hist := []llm.Message{{Role: llm.RoleUser, Content: "before"}, {Role: llm.RoleAssistant, Content: "reply"}}
	prep, err := preparer(t, log).Prepare(context.Background(), runprep.Request{Agent: def, Who: who, UserText: "now",
		History: func(context.Context) ([]llm.Message, error) { return hist, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(prep.Snapshot.Agent.History) != 2 || prep.Snapshot.Agent.History[0].Content != "before" {
		t.Fatalf("history = %+v", prep.Snapshot.Agent.History)
	}
	boom := errors.New("history unavailable")
	_, err = preparer(t, log).Prepare(context.Background(), runprep.Request{Agent: def, Who: who,
		History: func(context.Context) ([]llm.Message, error) { return nil, boom }})
	var re *runprep.ResolveError
	if !errors.Is(err, boom) || errors.As(err, &re) {
		t.Fatalf("err = %v, want the history's error unchanged", err)
	}
}

func TestPrepareReturnsTheStoresError(t *testing.T) {
	boom := errors.New("disk full")
	_, err := preparer(t, &snapshots{fail: boom}).Prepare(context.Background(), runprep.Request{Agent: &agentdef.Definition{ID: "a"}, Who: who})
	var re *runprep.ResolveError
	if !errors.Is(err, boom) || errors.As(err, &re) {
		t.Fatalf("err = %v, want the store's error unchanged", err)
	}
}

// Task runs add the skills' instructions to the system prompt; firings
// and webhook runs send the agent's prompt as written.
func TestPrepareSkillInstructions(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := "---\nname: notes\ndescription: Keep notes.\nversion: \"1.0\"\n---\nWrite notes tidily.\n"
	if err := os.WriteFile(filepath.Join(dir, skills.ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	p := preparer(t, &snapshots{})
	p.Toolbox.Skills = skills.NewRegistry([]string{root}, nil)
	def := &agentdef.Definition{ID: "a", SystemPrompt: "You help.", Skills: []string{"notes"}}
	with, err := p.Prepare(context.Background(), runprep.Request{Agent: def, Who: who, SkillInstructions: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := with.Snapshot.Agent.SystemPrompt; !strings.HasPrefix(got, "You help.") || !strings.Contains(got, "Write notes tidily.") {
		t.Fatalf("system prompt with skills = %q", got)
	}
	without, err := p.Prepare(context.Background(), runprep.Request{Agent: def, Who: who})
	if err != nil {
		t.Fatal(err)
	}
	if got := without.Snapshot.Agent.SystemPrompt; got != "You help." {
		t.Fatalf("system prompt as written = %q", got)
	}
	if !slices.Equal(with.Snapshot.Builtins, []string{skills.Grant("notes")}) {
		t.Fatalf("grants = %v", with.Snapshot.Builtins)
	}
}
