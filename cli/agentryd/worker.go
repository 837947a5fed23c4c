package agentryd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/gateway"
)

func newWorkerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run a Temporal worker only (scale-out); needs temporal.address and a shared database",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, log, closer, err := loadRuntime(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closer.Close()
			if cfg.Temporal.Address == "" {
				return fmt.Errorf("agentryd worker needs temporal.address (AGENTRY_TEMPORAL_ADDRESS): a worker joins a cluster, it does not start one")
			}
			w, err := gateway.StartWorker(ctx, gateway.Options{Config: cfg, Logger: log})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Agentry worker polling task queue %s on %s\n", cfg.Temporal.TaskQueue, cfg.Temporal.Address)
			<-ctx.Done()
			w.Shutdown(cmd.Context())
			return nil
		},
	}
}
