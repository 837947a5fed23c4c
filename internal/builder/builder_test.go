package builder_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/builder"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type env struct {
	svc   *builder.Service
	fake  *fakellm.Server
	ctrl  *costs.Controller
	dir   string
	agent *agentdef.Registry
}

const validDraft = "```yaml\nid: greeter\nname: Greeter\ndescription: Says hello\nsystem_prompt: Greet the user warmly.\nllm: {provider: openai, model: gpt-4o-mini}\nbuiltins: [http_get]\n```\n"

func newEnv(t testing.TB, mutate func(*config.Config)) *env {
	t.Helper()
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	cfg := config.Defaults()
	cfg.LLM.DefaultProvider = "openai"
	cfg.LLM.Providers = map[string]config.ProviderConfig{
		"openai": {Type: "openai", BaseURL: fake.URL() + "/v1", DefaultModel: "gpt-4o-mini", Models: []string{"gpt-4o-mini", "drafty"}, MaxRetries: -1},
	}
	cfg.Costs.EnforcementMode = "hard"
	cfg.Costs.Pricing = map[string]config.PriceConfig{
		"openai/gpt-4o-mini": {InputPerMTok: 1, OutputPerMTok: 10, Source: "test", Version: "v1"},
		"openai/drafty":      {InputPerMTok: 1, OutputPerMTok: 10, Source: "test", Version: "v1"},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if err := config.Validate(&cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := models.Open(ctx, models.Options{Driver: models.DriverSQLite, DSN: filepath.Join(t.TempDir(), "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctrl, err := costs.New(ctx, costs.Options{Config: &cfg, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	p, err := llm.NewProvider("openai", llm.ProviderConfig{Type: "openai", BaseURL: fake.URL() + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	router := llm.NewRouter(map[string]llm.Provider{"openai": p}, "openai")
	router.SetGate(ctrl)
	dir := t.TempDir()
	reg := agentdef.NewRegistry([]string{dir}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	svc := &builder.Service{Router: router, Agents: reg, Files: agentdef.NewFiles(dir, reg), Ledger: ctrl,
		Catalog: func() builder.Catalog {
			c := builder.CatalogFromConfig(&cfg)
			for _, d := range reg.List() {
				c.Agents = append(c.Agents, d.ID)
			}
			c.Sort()
			return c
		}}
	return &env{svc: svc, fake: fake, ctrl: ctrl, dir: dir, agent: reg}
}

func detail(t *testing.T, err error) fault.Detail {
	t.Helper()
	f, ok := fault.As(err)
	if !ok {
		t.Fatalf("want a fault, got %T %v", err, err)
	}
	return f.Fault()
}

// Two builds at once, each its own accounting run: the one whose drafts
// keep failing exhausts its allowance (402, telling what it spent), the
// other finishes within its own.
func TestConcurrentBuildsEachHaveTheirOwnAllowance(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.LLM.Studio.MaxBuildTokens = 2000 })
	e.fake.Script(
		fakellm.Rule{Model: "drafty", Reply: "id: [not, valid", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 1900}},
		fakellm.Rule{Model: "gpt-4o-mini", Reply: validDraft, Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 100}},
	)
	var wg sync.WaitGroup
	var errA, errB error
	var draftB *builder.Draft
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, errA = e.svc.Generate(context.Background(), builder.GenerateRequest{Description: "an agent that greets", Model: builder.Model{Model: "drafty"}})
	}()
	go func() {
		defer wg.Done()
		draftB, errB = e.svc.Generate(context.Background(), builder.GenerateRequest{Description: "an agent that greets"})
	}()
	wg.Wait()
	var ae *builder.AllowanceError
	if !errors.As(errA, &ae) {
		t.Fatalf("build A: want the allowance to end it, got %v", errA)
	}
	if d := detail(t, errA); d.Kind != fault.KindBudget || d.Code != costs.CodeBudgetExceeded {
		t.Fatalf("build A: %+v", d)
	}
	if ae.Spent.Calls != 1 || ae.Spent.OutputTokens != 1900 || ae.Spent.CostMicros == 0 || !strings.Contains(errA.Error(), "1900 output tokens") {
		t.Fatalf("build A spent %+v: %v", ae.Spent, errA)
	}
	if errB != nil {
		t.Fatalf("build B: %v", errB)
	}
	if draftB.ID != "greeter" || draftB.Spent.RunID == ae.Spent.RunID || draftB.Spent.Calls != 1 {
		t.Fatalf("build B: %+v", draftB)
	}
	rows, err := e.ctrl.Calls(context.Background(), models.LedgerFilter{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Source != llm.SourceBuilder || (r.RunID != ae.Spent.RunID && r.RunID != draftB.Spent.RunID) {
			t.Fatalf("ledger row source %s run %s", r.Source, r.RunID)
		}
	}
}

func TestGenerateRefusesAToolOutsideTheAllowlist(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Script(fakellm.Rule{Reply: strings.Replace(validDraft, "http_get", "shell_exec", 1)})
	_, err := e.svc.Generate(context.Background(), builder.GenerateRequest{Description: "an agent with a shell"})
	d := detail(t, err)
	if d.Kind != fault.KindForbidden || d.Code != "not_allowed" || d.Fields["name"] != "shell_exec" || !strings.Contains(d.Message, `"shell_exec"`) {
		t.Fatalf("want 403 not_allowed naming shell_exec, got %+v", d)
	}
	if n := e.fake.CallCount(); n != builder.MaxAttempts {
		t.Fatalf("%d drafts asked for, want %d", n, builder.MaxAttempts)
	}
	// The model was told why and asked again.
	if last := e.fake.Calls()[builder.MaxAttempts-1]; !strings.Contains(last.LastUserMessage, "shell_exec") {
		t.Fatalf("repair prompt %q", last.LastUserMessage)
	}
	if entries, _ := os.ReadDir(e.dir); len(entries) != 0 {
		t.Fatalf("generate wrote %v", entries)
	}
}

func TestGenerateRepairsAnInvalidDraft(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.Script(fakellm.Rule{Times: 1, Reply: "id: Not An Id\n"}, fakellm.Rule{Reply: validDraft})
	d, err := e.svc.Generate(context.Background(), builder.GenerateRequest{Description: "greets"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Attempts != 2 || !strings.HasPrefix(d.Definition, "id: greeter\n") {
		t.Fatalf("%+v", d)
	}
}

func TestRefineGivesTheDiff(t *testing.T) {
	e := newEnv(t, nil)
	before := "id: greeter\nname: Greeter\nsystem_prompt: Greet the user warmly.\nllm: {provider: openai, model: gpt-4o-mini}\n"
	after := "id: greeter\nname: Greeter\nsystem_prompt: Greet the user warmly, in French.\nllm: {provider: openai, model: gpt-4o-mini}\n"
	e.fake.Script(fakellm.Rule{Contains: "in French", Reply: "```yaml\n" + after + "```"})
	d, err := e.svc.Refine(context.Background(), builder.RefineRequest{Definition: before, Instruction: "answer in French"})
	if err != nil {
		t.Fatal(err)
	}
	want := "--- a/greeter.yaml\n+++ b/greeter.yaml\n@@ -1,4 +1,4 @@\n id: greeter\n name: Greeter\n-system_prompt: Greet the user warmly.\n+system_prompt: Greet the user warmly, in French.\n llm: {provider: openai, model: gpt-4o-mini}\n"
	if d.Diff != want || d.Definition != after {
		t.Fatalf("diff:\n%q\ndefinition:\n%q", d.Diff, d.Definition)
	}
}

func TestBadInputIsRefusedBeforeAnyCall(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.svc.Generate(ctx, builder.GenerateRequest{Description: strings.Repeat("a", 1<<20)})
	if d := detail(t, err); d.Kind != fault.KindInvalid || d.Fields["field"] != "description" {
		t.Fatalf("1 MB description: %+v", d)
	}
	_, err = e.svc.Refine(ctx, builder.RefineRequest{Definition: "id: [oops", Instruction: "shorter"})
	if d := detail(t, err); d.Kind != fault.KindInvalid || d.Code != "invalid_definition" {
		t.Fatalf("refine of a definition that does not parse: %+v", d)
	}
	_, err = e.svc.Build(ctx, builder.BuildRequest{Definition: "id: x\nbuiltins: [rm_rf]\n"})
	if d := detail(t, err); d.Kind != fault.KindForbidden || d.Fields["name"] != "rm_rf" {
		t.Fatalf("unknown builtin: %+v", d)
	}
	_, err = e.svc.Build(ctx, builder.BuildRequest{Definition: "id: x\nllm: {provider: openai, model: gpt-5-huge}\n"})
	if d := detail(t, err); d.Kind != fault.KindForbidden || d.Fields["name"] != "gpt-5-huge" {
		t.Fatalf("model outside the provider's list: %+v", d)
	}
	if n := e.fake.CallCount(); n != 0 {
		t.Fatalf("%d provider calls", n)
	}
}

func TestBuildRunsTheSuiteThenSaves(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	def := strings.Trim(strings.TrimPrefix(validDraft, "```yaml\n"), "`\n") + "\n"
	suite := &builder.EvalSuite{Cases: []builder.EvalCase{{Name: "hello", Input: "hi there", ExpectedContains: []string{"HI THERE"}}}}
	// The fake echoes: the case passes.
	res, err := e.svc.Build(ctx, builder.BuildRequest{Definition: def, Enabled: true, Evals: suite})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Enabled || len(res.Evals) != 1 || !res.Evals[0].Passed || res.Spent.Calls != 1 {
		t.Fatalf("%+v", res)
	}
	got, ok := e.agent.Get("greeter")
	if !ok || !got.IsEnabled() {
		t.Fatalf("saved agent %+v", got)
	}
	// Again without overwrite: 409 before any call.
	n := e.fake.CallCount()
	_, err = e.svc.Build(ctx, builder.BuildRequest{Definition: def, Evals: suite})
	if d := detail(t, err); d.Kind != fault.KindConflict || d.Code != "exists" || e.fake.CallCount() != n {
		t.Fatalf("existing id: %+v", d)
	}
	// A failing suite saves nothing, even with overwrite.
	bad := &builder.EvalSuite{Cases: []builder.EvalCase{{Input: "hi", ExpectedContains: []string{"bonjour"}}}}
	_, err = e.svc.Build(ctx, builder.BuildRequest{Definition: strings.Replace(def, "Says hello", "Changed", 1), Overwrite: true, Evals: bad})
	if d := detail(t, err); d.Code != "evals_failed" {
		t.Fatalf("failing suite: %+v", d)
	}
	if got, _ := e.agent.Get("greeter"); got.Description != "Says hello" {
		t.Fatalf("a failed build changed the agent: %q", got.Description)
	}
	// Saved disabled when asked.
	res, err = e.svc.Build(ctx, builder.BuildRequest{Definition: def, Overwrite: true})
	if err != nil || res.Enabled {
		t.Fatalf("%+v %v", res, err)
	}
	if got, _ := e.agent.Get("greeter"); got.IsEnabled() {
		t.Fatal("want disabled")
	}
}
