package agentry

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// workboardCommand holds the task board's commands (docs/workboard.md);
// today the retry of a failed run (docs/retry.md).
func (a *App) workboardCommand() *cobra.Command {
	retry := &cobra.Command{
		Use:   "retry TASK_ID RUN_ID",
		Short: "Retry a failed or timed-out run from its last recorded step (a new attempt; finished steps are not repeated or paid again)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids [2]int64
			for i, what := range []string{"task id", "run id"} {
				id, err := strconv.ParseInt(args[i], 10, 64)
				if err != nil || id <= 0 {
					return usagef("%q is not a %s", args[i], what)
				}
				ids[i] = id
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			run, err := c.RetryRun(cmd.Context(), ids[0], ids[1])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, run.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "Run %d (attempt %d of task %d) retries run %d from its last recorded step (%d turns reused); it is %s.\n",
				run.ID, run.Attempt, run.TaskID, run.RetryOf, run.ReusedTurns, run.Status)
			return nil
		},
	}
	return group("workboard", "Task board runs", retry)
}
