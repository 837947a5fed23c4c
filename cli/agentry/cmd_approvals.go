package agentry

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// approvalsCommand lists and decides the tool approvals durable runs wait
// for (docs/approvals.md).
func (a *App) approvalsCommand() *cobra.Command {
	var status, agentID, schedule string
	var taskID int64
	list := &cobra.Command{
		Use:   "list [--status pending] [--task ID] [--agent ID] [--schedule AGENT_ID]",
		Short: "List tool approvals (default: pending ones)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			if status == "all" {
				status = ""
			}
			l, err := c.Approvals(cmd.Context(), apiclient.ApprovalFilter{Status: status, TaskID: taskID, AgentID: agentID, Schedule: schedule})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Approvals) == 0 {
				fmt.Fprintln(a.Stdout, "No approvals.")
				return nil
			}
			rows := [][]string{}
			for _, ap := range l.Approvals {
				rows = append(rows, []string{strconv.FormatInt(ap.ID, 10), approvalRun(ap), ap.AgentID, ap.Tool, string(ap.Status),
					fmtTime(&ap.ExpiresAt), string(ap.Arguments)})
			}
			table(a.Stdout, []string{"ID", "RUN", "AGENT", "TOOL", "STATUS", "EXPIRES", "ARGUMENTS"}, rows)
			return nil
		},
	}
	list.Flags().StringVar(&status, "status", "pending", "pending, approved, rejected, expired, cancelled or all")
	list.Flags().Int64Var(&taskID, "task", 0, "only approvals of this task")
	list.Flags().StringVar(&agentID, "agent", "", "only approvals of this agent")
	list.Flags().StringVar(&schedule, "schedule", "", "only approvals of the scheduled firings of this agent")
	return group("approvals", "Tool calls durable runs wait on a person for", list,
		a.decideCommand("approve", "Approve a pending tool call: the run executes it and goes on"),
		a.decideCommand("reject", "Reject a pending tool call: the run is told \"rejected by <you>: <comment>\" and goes on"))
}

// approvalRun names the run an approval belongs to: "task 3 run 7" or
// "firing <workflow id>" (a scheduled firing).
func approvalRun(ap openapi.Approval) string {
	if ap.Firing != nil {
		return "firing " + ap.Firing.WorkflowID
	}
	return fmt.Sprintf("task %d run %d", ap.TaskID, ap.RunID)
}

func (a *App) decideCommand(decision, short string) *cobra.Command {
	var comment string
	cmd := &cobra.Command{
		Use:   decision + " ID [--comment TEXT]",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return fmt.Errorf("%q is not an approval id", args[0])
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ap, err := c.DecideApproval(cmd.Context(), id, decision, comment)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, ap.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "Approval %d (%s of %s) is %s.\n", ap.ID, ap.Tool, approvalRun(ap.Approval), ap.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&comment, "comment", "", "why (the model sees it on a rejection)")
	return cmd
}
