package builder_test

import (
	"context"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/builder"
)

// BenchmarkGenerate is the builder's own cost per request, the model's
// time aside (dev/fakellm answers at once): the catalog and prompt, the
// request's accounting run through the cost controller (admission,
// settlement, ledger row), and the draft's checks (catalog names, then
// agentdef's validation). docs/benchmarks.md, "Builder".
//
//	go test -run '^$' -bench . -benchtime 300x ./internal/builder/
func BenchmarkGenerate(b *testing.B) {
	e := newEnv(b, nil)
	e.fake.Script(fakellm.Rule{Reply: validDraft})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.svc.Generate(ctx, builder.GenerateRequest{Description: "an agent that greets visitors"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRefineWithDiff(b *testing.B) {
	e := newEnv(b, nil)
	before := "id: greeter\nname: Greeter\nsystem_prompt: Greet the user warmly.\nllm: {provider: openai, model: gpt-4o-mini}\n"
	e.fake.Script(fakellm.Rule{Reply: "```yaml\nid: greeter\nname: Greeter\nsystem_prompt: Greet the user warmly, in French.\nllm: {provider: openai, model: gpt-4o-mini}\n```"})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.svc.Refine(ctx, builder.RefineRequest{Definition: before, Instruction: "answer in French"}); err != nil {
			b.Fatal(err)
		}
	}
}
