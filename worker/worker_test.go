package worker_test

import (
	"reflect"
	"testing"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/worker"
	"github.com/agentryhq/agentry/workflows"
)

// The workflows call activities by the names in their contracts; the
// worker registers activity structs, whose method names become the
// activity names. Every contract name must be a method of its struct.
func TestContractActivityNamesAreRegisteredMethods(t *testing.T) {
	cases := []struct {
		acts  any
		names []string
	}{
		{&activities.TaskRunActivities{}, []string{workflows.ActivityTaskRunStart, workflows.ActivityTaskRunFinish,
			workflows.ActivityTaskRunLLMTurn, workflows.ActivityTaskRunTool, workflows.ActivityTaskRunWait}},
		{&activities.ApprovalActivities{}, []string{workflows.ActivityApprovalRequest, workflows.ActivityApprovalDone}},
		{&activities.ScheduledActivities{}, []string{workflows.ActivityScheduledAgentRun, workflows.ActivityScheduledAgentRecord}},
		{&activities.DeliveryActivities{}, []string{workflows.ActivityDeliveryAttempt, workflows.ActivityDeliveryFinish}},
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.acts)
		for _, n := range c.names {
			if _, ok := typ.MethodByName(n); !ok {
				t.Errorf("%s has no method %s named by the workflow contract", typ, n)
			}
		}
	}
}

func TestEveryWorkflowIsRegisteredOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, wf := range worker.Workflows {
		if seen[wf.Name] || wf.Name == "" || wf.Fn == nil {
			t.Errorf("bad or duplicate workflow registration %q", wf.Name)
		}
		seen[wf.Name] = true
	}
	for _, n := range []string{workflows.TaskRunWorkflowName, workflows.ScheduledAgentWorkflowName, workflows.DeliveryWorkflowName} {
		if !seen[n] {
			t.Errorf("workflow %s is not registered", n)
		}
	}
}
