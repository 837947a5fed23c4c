package agentry

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

func (a *App) costsCommand() *cobra.Command {
	costs := &cobra.Command{
		Use:   "costs",
		Short: "Cost governance: reconciliation with provider usage exports",
		Args:  noArgs,
	}
	var day string
	reconcile := &cobra.Command{
		Use:   "reconcile [--day YYYY-MM-DD]",
		Short: "Compare the ledger with the providers' usage exports for a completed UTC day (default: yesterday) and wait for the result",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			started, err := c.StartReconciliation(ctx, day)
			if err != nil {
				return err
			}
			if !a.jsonOut {
				fmt.Fprintf(a.Stderr, "Reconciling %s (run %s)...\n", started.Day, started.RunID)
			}
			seen := map[string]string{}
			for {
				run, err := c.ReconciliationRun(ctx, started.RunID)
				if err != nil {
					return err
				}
				if !a.jsonOut {
					// Progress: one line per provider state change.
					for _, p := range run.Providers {
						if seen[p.Provider] != string(p.Status) {
							seen[p.Provider] = string(p.Status)
							line := fmt.Sprintf("  %s: %s", p.Provider, p.Status)
							if p.Status == "imported" {
								line += fmt.Sprintf(" (%d rows, %d pages)", p.Rows, p.Pages)
							}
							if p.Error != "" {
								line += ": " + p.Error
							}
							fmt.Fprintln(a.Stderr, line)
						}
					}
				}
				if run.Status != "running" {
					if a.jsonOut {
						return printJSON(a.Stdout, run.RawJSON())
					}
					return a.printReconciliation(run)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Second):
				}
			}
		},
	}
	reconcile.Flags().StringVar(&day, "day", "", "UTC day to reconcile, YYYY-MM-DD (default: the previous completed day)")
	costs.AddCommand(reconcile, a.chargebackCommand())
	return costs
}

func (a *App) printReconciliation(r *apiclient.ReconciliationRun) error {
	day, status, errText := r.Day, r.Status, r.Error
	rows := [][]string{}
	for _, p := range r.Providers {
		alert := ""
		if p.Alert {
			alert = "ALERT"
		}
		rows = append(rows, []string{p.Provider, string(p.Status), fmt.Sprintf("$%.6f", p.ProviderCostUSD), fmt.Sprintf("$%.6f", p.LedgerCostUSD),
			fmt.Sprintf("$%.6f", p.VarianceUSD), strconv.FormatFloat(100*p.VarianceFraction, 'f', 1, 64) + "%", alert})
	}
	fmt.Fprintf(a.Stdout, "Reconciliation of %s: %s\n", day, status)
	if errText != "" {
		fmt.Fprintf(a.Stdout, "Error: %s\n", errText)
	}
	table(a.Stdout, []string{"PROVIDER", "STATUS", "PROVIDER COST", "LEDGER COST", "VARIANCE", "FRACTION", ""}, rows)
	if status == "failed" {
		return fmt.Errorf("reconciliation of %s failed", day)
	}
	return nil
}
