package agentryd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Development helpers: the embedded Temporal server alone (the fake LLM provider is `go run ./dev/cmd/fake-llm`)"}
	dev.AddCommand(&cobra.Command{
		Use:   "temporal",
		Short: "Run only the embedded Temporal server (share one Temporal between several gateways)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !embeddedAvailable {
				return errors.New("this build has no embedded Temporal server")
			}
			ctx := cmd.Context()
			cfg, log, closer, err := loadRuntime(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closer.Close()
			if err := cfg.Workspace.Ensure(); err != nil {
				return err
			}
			srv, err := startEmbeddedTemporal(ctx, cfg, log)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Temporal frontend %s (namespace %s)\n", srv.FrontendAddress(), cfg.Temporal.Namespace)
			if ui := srv.UIAddress(); ui != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "Temporal Web UI http://%s\n", ui)
			}
			<-ctx.Done()
			return srv.Stop()
		},
	})
	return dev
}
