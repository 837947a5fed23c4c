package uppercase_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentryhq/agentry/drivers"
	_ "github.com/agentryhq/agentry/drivers/example/uppercase"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
)

// The example driver registers its tool, agents may list it in builtins,
// the model gets its schema and the toolbox runs it.
func TestExampleDriverPlugsIntoAgents(t *testing.T) {
	if len(drivers.All()) != 1 {
		t.Fatalf("drivers = %+v", drivers.All())
	}
	def, err := agentdef.Parse([]byte("id: shout\nllm: {provider: p}\nbuiltins: [uppercase, read_file]\n"), "shout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tools := agent.ToolsFor(def.Builtins)
	if len(tools) != 2 || tools[0].Name != "uppercase" || !json.Valid(tools[0].Parameters) {
		t.Fatalf("tools = %+v", tools)
	}
	tb := agent.NewToolbox(netguard.Policy{}, 0)
	res, err := tb.Execute(context.Background(), t.TempDir(), def.Builtins, llm.ToolCall{Name: "uppercase", Arguments: json.RawMessage(`{"text":"hi there"}`)})
	if err != nil || res.IsError || res.Content != "HI THERE" {
		t.Fatalf("run: %+v %v", res, err)
	}
	res, _ = tb.Execute(context.Background(), t.TempDir(), def.Builtins, llm.ToolCall{Name: "uppercase", Arguments: json.RawMessage(`{}`)})
	if !res.IsError {
		t.Fatalf("bad arguments: %+v", res)
	}
	if _, err := agentdef.Parse([]byte("id: x\nllm: {provider: p}\nbuiltins: [lowercase]\n"), "x.yaml"); err == nil {
		t.Fatal("an unknown tool passed validation")
	}
}

func TestRegisterRefusesMistakes(t *testing.T) {
	for name, d := range map[string]drivers.Driver{
		"duplicate tool": {Name: "b", Tools: []drivers.Tool{{Name: "uppercase", Run: func(context.Context, json.RawMessage) (string, error) { return "", nil }}}},
		"builtin":        {Name: "c", Tools: []drivers.Tool{{Name: "read_file", Run: func(context.Context, json.RawMessage) (string, error) { return "", nil }}}},
		"no run":         {Name: "d", Tools: []drivers.Tool{{Name: "x"}}},
		"empty name":     {},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			drivers.Register(d)
		}()
	}
}
