package agent

// ApprovalRefusedInChat is the tool result chat (and synchronous webhooks)
// give the model for a tool that needs approval: nobody can be asked while
// a synchronous request waits.
func ApprovalRefusedInChat(tool string) ToolResult {
	return ToolResult{IsError: true, Content: "tool " + tool + " needs a person's approval (agent approvals.tools), which a chat " +
		"conversation cannot wait for; it was not executed. Run this work as a task (workboard) to have the call approved."}
}
