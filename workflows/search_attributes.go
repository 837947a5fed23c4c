package workflows

import (
	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Custom search attributes Agentry's workflows carry, so operators find
// runs in the Web UI by task, agent or trigger. The embedded server
// registers the ones listed in temporal.yaml (a test keeps the file and
// SearchAttributes in step); an external cluster needs them added once.
const (
	SearchAttributeTaskID  = "AgentryTaskID"
	SearchAttributeAgentID = "AgentryAgentID"
	SearchAttributeTrigger = "AgentryTrigger"
)

// Typed keys of the search attributes above.
var (
	SearchAttrTaskID  = temporal.NewSearchAttributeKeyInt64(SearchAttributeTaskID)
	SearchAttrAgentID = temporal.NewSearchAttributeKeyKeyword(SearchAttributeAgentID)
	SearchAttrTrigger = temporal.NewSearchAttributeKeyKeyword(SearchAttributeTrigger)
)

// SearchAttributes returns a new map of the search attributes and their
// types.
func SearchAttributes() map[string]enums.IndexedValueType {
	return map[string]enums.IndexedValueType{
		SearchAttributeTaskID:  enums.INDEXED_VALUE_TYPE_INT,
		SearchAttributeAgentID: enums.INDEXED_VALUE_TYPE_KEYWORD,
		SearchAttributeTrigger: enums.INDEXED_VALUE_TYPE_KEYWORD,
	}
}
