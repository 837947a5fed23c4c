package worker

import (
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/workflows"
)

// Workflow is one registered workflow: its function and contract name.
type Workflow struct {
	Name string
	Fn   any
}

// Workflows are every workflow the worker runs. Add new ones here.
var Workflows = []Workflow{
	{workflows.TaskRunWorkflowName, workflows.TaskRun},
	{workflows.ScheduledAgentWorkflowName, workflows.ScheduledAgent},
	{workflows.DeliveryWorkflowName, workflows.Delivery},
	{workflows.ReconcileWorkflowName, workflows.Reconcile},
	{workflows.WebhookRunWorkflowName, workflows.WebhookRun},
	{workflows.PackageInstallWorkflowName, workflows.PackageInstall},
	{workflows.ChannelConversationWorkflowName, workflows.ChannelConversation},
	{workflows.ChannelTurnWorkflowName, workflows.ChannelTurn},
	{workflows.KnowledgeIngestWorkflowName, workflows.KnowledgeIngest},
	{workflows.PeerRunWorkflowName, workflows.PeerRun},
}

// RegisterWorkflows registers every workflow under its contract name (on a
// worker, a replayer or a test environment).
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	for _, wf := range Workflows {
		r.RegisterWorkflowWithOptions(wf.Fn, workflow.RegisterOptions{Name: wf.Name})
	}
}
