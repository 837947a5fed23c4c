package agentdef

import (
	"errors"
	"strings"
	"testing"
)

func TestUnknownKnowledgeBaseNamesFileAndLine(t *testing.T) {
	src := []byte("id: helper\nllm:\n  provider: openai\nknowledge:\n  - handbook\n  - nope\n")
	if _, err := ParseWith(src, "agents/helper.yaml", Refs{KnowledgeBases: []string{"handbook"}}); err == nil {
		t.Fatal("unknown base accepted")
	} else {
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Problems[0].Line != 4 || ve.Problems[0].Key != "knowledge" ||
			!strings.Contains(err.Error(), `agents/helper.yaml:4: knowledge: unknown knowledge base "nope"`) {
			t.Fatalf("error = %v (%+v)", err, ve)
		}
	}
	d, err := ParseWith(src[:len(src)-len("  - nope\n")], "agents/helper.yaml", Refs{KnowledgeBases: []string{"handbook"}})
	if err != nil {
		t.Fatal(err)
	}
	grants := d.ToolGrants()
	if !strings.Contains(strings.Join(grants, ","), "knowledge_search,knowledge:handbook") {
		t.Fatalf("grants = %v", grants)
	}
	// Without the gateway's configuration (a package), names are not checked.
	if _, err := Parse(src, "pkg"); err != nil {
		t.Fatalf("Parse without refs: %v", err)
	}
}
