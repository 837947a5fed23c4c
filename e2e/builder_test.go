package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

const builderDraft = "```yaml\nid: greeter\nname: Greeter\ndescription: Greets visitors\nsystem_prompt: Greet the visitor warmly.\nllm: {provider: openai, model: gpt-4o-mini}\nbuiltins: [http_get]\n```\n"

func startBuilderGateway(t *testing.T, extra string) *gatewaytest.Gateway {
	return startChatGateway(t, "llm:\n  default_provider: openai\n  studio: {max_build_tokens: 3000}\n"+extra)
}

// Issue 50: a generated agent, built enabled, answers in chat; its
// builder calls are in the ledger under source builder; bad input is a
// clear 4xx that saves nothing.
func TestBuilderGeneratedAgentAnswersInChat(t *testing.T) {
	g := startBuilderGateway(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "greets visitors", Reply: builderDraft, Usage: &fakellm.Usage{InputTokens: 300, OutputTokens: 80}})

	r := g.Do("POST", "/api/v1/builder/generate", map[string]any{"description": "an agent that greets visitors"})
	if r.Status != 200 || r.JSON["id"] != "greeter" {
		t.Fatalf("generate: %d %s", r.Status, r.Raw)
	}
	def := r.JSON["definition"].(string)
	runID := r.JSON["spent"].(map[string]any)["run_id"].(string)

	b := g.Do("POST", "/api/v1/builder/build", map[string]any{"definition": def, "enabled": true,
		"evals": map[string]any{"cases": []any{map[string]any{"input": "hello there", "expected_contains": []string{"hello"}}}}})
	if b.Status != 201 || b.JSON["enabled"] != true || b.JSON["file"] != "greeter.yaml" {
		t.Fatalf("build: %d %s", b.Status, b.Raw)
	}
	c := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "greeter", "text": "good morning"})
	if c.Status != 200 || c.JSON["reply"] != "echo: good morning" {
		t.Fatalf("chat with the built agent: %d %s", c.Status, c.Raw)
	}
	if last := g.Fake.Calls()[len(g.Fake.Calls())-1]; !strings.Contains(fmt.Sprint(last.Model), "gpt-4o-mini") {
		t.Fatalf("chat used %v", last.Model)
	}
	l := g.Do("GET", "/api/v1/costs/calls?run_id="+runID, nil)
	calls, _ := l.JSON["calls"].([]any)
	if l.Status != 200 || len(calls) != 1 || calls[0].(map[string]any)["source"] != "builder" {
		t.Fatalf("ledger of the generate run: %d %s", l.Status, l.Raw)
	}

	agentsDir := filepath.Join(g.Workspace, "agents")
	before, _ := os.ReadDir(agentsDir)
	n := g.Fake.CallCount()
	for _, tc := range []struct {
		path   string
		body   map[string]any
		status int
		want   string
	}{
		{"/api/v1/builder/generate", map[string]any{"description": strings.Repeat("x", 1<<20)}, 400, "description"},
		{"/api/v1/builder/refine", map[string]any{"definition": "id: [broken", "instruction": "shorter"}, 400, "invalid_definition"},
		{"/api/v1/builder/build", map[string]any{"definition": def}, 409, "exists"},
		{"/api/v1/builder/build", map[string]any{"definition": strings.Replace(def, "http_get", "shell_exec", 1), "overwrite": true}, 403, "shell_exec"},
	} {
		r := g.Do("POST", tc.path, tc.body)
		if r.Status != tc.status || !strings.Contains(string(r.Raw), tc.want) || r.JSON["error"] == nil {
			t.Errorf("%s: %d %.300s", tc.path, r.Status, r.Raw)
		}
	}
	after, _ := os.ReadDir(agentsDir)
	if len(after) != len(before) || g.Fake.CallCount() != n {
		t.Fatalf("bad input changed something: %d -> %d files, %d provider calls", len(before), len(after), g.Fake.CallCount()-n)
	}
	// A viewer may not build.
	if r := g.DoAs(viewerKey, "POST", "/api/v1/builder/generate", map[string]any{"description": "x"}); r.Status != 403 {
		t.Fatalf("viewer: %d", r.Status)
	}
}

// Two builds at once through the API, each with its own allowance: the
// one whose model keeps drafting nonsense exhausts it (402 with what it
// spent), the other finishes.
func TestBuilderConcurrentBuildsOwnAllowances(t *testing.T) {
	g := startBuilderGateway(t, "")
	g.Fake.Script(
		fakellm.Rule{Model: "gpt-4o", Reply: "id: [nonsense", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 2950}},
		fakellm.Rule{Model: "gpt-4o-mini", Contains: "greets visitors", Reply: builderDraft, Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 80}},
	)
	var wg sync.WaitGroup
	res := make([]gatewaytest.Response, 2)
	for i, model := range []string{"gpt-4o", "gpt-4o-mini"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = g.Do("POST", "/api/v1/builder/generate", map[string]any{"description": "an agent that greets visitors",
				"builder": map[string]any{"provider": "openai", "model": model}})
		}()
	}
	wg.Wait()
	if res[0].Status != 402 || res[0].JSON["code"] != "budget_exceeded" {
		t.Fatalf("exhausting build: %d %s", res[0].Status, res[0].Raw)
	}
	spent, _ := res[0].JSON["spent"].(map[string]any)
	if spent == nil || spent["output_tokens"] != float64(2950) || !strings.Contains(fmt.Sprint(res[0].JSON["error"]), "2950 output tokens") {
		t.Fatalf("the refusal tells what was spent: %s", res[0].Raw)
	}
	if res[1].Status != 200 || res[1].JSON["id"] != "greeter" {
		t.Fatalf("the other build: %d %s", res[1].Status, res[1].Raw)
	}
}

// `agentry agent generate|refine|build` through the generated client.
func TestCLIAgentBuilder(t *testing.T) {
	g := startBuilderGateway(t, "")
	g.Fake.Script(
		fakellm.Rule{Contains: "greets visitors", Reply: builderDraft},
		fakellm.Rule{Contains: "in French", Reply: strings.Replace(builderDraft, "warmly.", "warmly, in French.", 1)},
	)
	h := newHome(t)
	h.Env["AGENTRY_GATEWAY"] = g.URL()
	h.Env["AGENTRY_API_KEY"] = gatewaytest.TestAPIKey
	file := filepath.Join(h.Dir, "greeter.yaml")

	r := h.run("--json", "agent", "generate", "an agent that greets visitors", "-o", file)
	expectCode(t, r, 0, "agent generate --json")
	var d map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &d); err != nil || d["id"] != "greeter" {
		t.Fatalf("generate --json: %v %s", err, r.Stdout)
	}
	r = h.run("agent", "refine", file, "answer", "in", "French", "-o", file)
	expectCode(t, r, 0, "agent refine")
	expectContains(t, r.Stdout, "+system_prompt: Greet the visitor warmly, in French.", "refine diff")
	r = h.run("agent", "build", file, "--enable")
	expectCode(t, r, 0, "agent build")
	expectContains(t, r.Stdout, "Agent greeter saved (enabled)", "build")
	r = h.run("agent", "build", file)
	if r.Code == 0 || !strings.Contains(r.Stderr, "already exists") {
		t.Fatalf("second build without --overwrite: %s", r)
	}
}
