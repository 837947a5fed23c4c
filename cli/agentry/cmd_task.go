package agentry

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentryhq/agentry/internal/apiclient"
)

// taskFlags are the task fields the CLI sets: only the flags given are sent.
type taskFlags struct {
	title, description, agent, status, priority string
	maxCost                                     float64
}

func (f *taskFlags) register(fs *pflag.FlagSet, create bool) {
	fs.StringVar(&f.title, "title", "", "the task's title")
	fs.StringVar(&f.description, "description", "", "what the agent should do")
	fs.StringVar(&f.agent, "agent", "", "the agent that runs the task")
	fs.StringVar(&f.priority, "priority", "", "low, normal, high or urgent")
	if !create {
		fs.StringVar(&f.status, "status", "", "todo, running, needs_review, done or failed")
	}
	fs.Float64Var(&f.maxCost, "max-cost-usd", 0, "cost cap in US dollars of a run of the task with the runs it delegates to (0: none); raising it resumes a run waiting for its cap")
}

// fields are the flags given, by API field name.
func (f *taskFlags) fields(fs *pflag.FlagSet) (map[string]any, error) {
	out := map[string]any{}
	for flag, field := range map[string]string{"title": "title", "description": "description", "agent": "agent_id", "status": "status", "priority": "priority"} {
		if fs.Changed(flag) {
			v, _ := fs.GetString(flag)
			out[field] = v
		}
	}
	if fs.Changed("max-cost-usd") {
		if f.maxCost < 0 || math.IsNaN(f.maxCost) || math.IsInf(f.maxCost, 0) {
			return nil, usagef("--max-cost-usd must be 0 or a positive number of US dollars, not %v", f.maxCost)
		}
		out["max_cost_usd"] = f.maxCost
	}
	return out, nil
}

func (a *App) taskCommand() *cobra.Command {
	var cf, uf taskFlags
	create := &cobra.Command{
		Use:   "create --title TITLE [--agent ID] [--max-cost-usd N]",
		Short: "Create a workboard task",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fields, err := cf.fields(cmd.Flags())
			if err != nil {
				return err
			}
			if _, ok := fields["title"]; !ok {
				return usagef("--title is required")
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			t, err := c.CreateTask(cmd.Context(), fields)
			if err != nil {
				return err
			}
			return a.printTask(t, "Created")
		},
	}
	cf.register(create.Flags(), true)
	update := &cobra.Command{
		Use:   "update TASK_ID [--max-cost-usd N] [--title ...] [--status ...]",
		Short: "Change the fields given of a workboard task (raising --max-cost-usd resumes a run waiting for its cost cap)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("%q is not a task id", args[0])
			}
			fields, err := uf.fields(cmd.Flags())
			if err != nil {
				return err
			}
			if len(fields) == 0 {
				return usagef("nothing to change: give one or more of --title, --description, --agent, --status, --priority, --max-cost-usd")
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			t, err := c.UpdateTask(cmd.Context(), id, fields)
			if err != nil {
				return err
			}
			return a.printTask(t, "Updated")
		},
	}
	uf.register(update.Flags(), false)
	return group("task", "Workboard tasks: create and change them", create, update)
}

func (a *App) printTask(t *apiclient.Task, verb string) error {
	if a.jsonOut {
		return printJSON(a.Stdout, t.RawJSON())
	}
	capText := "no cost cap"
	if t.MaxCostUSD > 0 {
		capText = fmt.Sprintf("cost cap $%.6g", t.MaxCostUSD)
	}
	fmt.Fprintf(a.Stdout, "%s task %d %q (%s, agent %s, %s).\n", verb, t.ID, t.Title, t.Status, t.AgentID, capText)
	return nil
}

// chargebackCommand is `agentry costs chargeback`.
func (a *App) chargebackCommand() *cobra.Command {
	var groupBy, from, to string
	cmd := &cobra.Command{
		Use:   "chargeback [--group-by user,feature,provider,model,agent,root_run] [--from DATE] [--to DATE]",
		Short: "Grouped usage and cost totals (root_run: one line per run tree, a run with the runs it delegated to)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			cb, err := c.Chargeback(cmd.Context(), groupBy, from, to)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, cb.RawJSON())
			}
			dims := make([]string, 0, len(cb.GroupBy))
			for _, d := range cb.GroupBy {
				dims = append(dims, string(d))
			}
			rows := [][]string{}
			for _, g := range cb.Groups {
				val := map[string]string{"user": g.User, "feature": g.Feature, "provider": g.Provider, "model": g.Model, "agent": g.Agent, "root_run": g.RootRun}
				r := make([]string, 0, len(dims)+2)
				for _, d := range dims {
					r = append(r, val[d])
				}
				rows = append(rows, append(r, strconv.FormatInt(g.Calls, 10), fmt.Sprintf("$%.6f", g.CostUSD)))
			}
			header := append([]string{}, dims...)
			for i := range header {
				header[i] = strings.ToUpper(header[i])
			}
			table(a.Stdout, append(header, "CALLS", "COST"), rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&groupBy, "group-by", "", "comma-separated dimensions: user, feature, provider, model, agent, root_run (default user,feature,provider,model)")
	cmd.Flags().StringVar(&from, "from", "", "RFC 3339 or YYYY-MM-DD (UTC; default: start of the month)")
	cmd.Flags().StringVar(&to, "to", "", "RFC 3339 or YYYY-MM-DD (a date includes that day; default: now)")
	return cmd
}
