package workflows_test

import (
	"maps"
	"testing"

	"github.com/agentryhq/agentry/internal/temporalserver/temporaldefaults"
	"github.com/agentryhq/agentry/workflows"
)

// The embedded server registers the search attributes of temporal.yaml;
// the workflows set these. The two must agree.
func TestSearchAttributesMatchTemporalYAML(t *testing.T) {
	if got := temporaldefaults.SearchAttributes(); !maps.Equal(got, workflows.SearchAttributes()) {
		t.Fatalf("temporal.yaml registers %v, the workflows set %v", got, workflows.SearchAttributes())
	}
}
