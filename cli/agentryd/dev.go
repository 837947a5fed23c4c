package agentryd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Development helpers: the embedded Temporal server alone (the fake LLM provider is `go run ./dev/cmd/fake-llm`)"}
	var pg postgresFlags
	temporalCmd := &cobra.Command{
		Use:   "temporal",
		Short: "Run only the embedded Temporal server (share one Temporal between several gateways); --postgres keeps it in PostgreSQL",
		Long: `Run only the Temporal server this binary embeds (go.temporal.io/server v1.32.1).

Without --postgres it keeps its state in a SQLite file in the workspace (one
machine). With --postgres <dsn> (or AGENTRY_TEMPORAL_POSTGRES_DSN) persistence
and visibility live in PostgreSQL, the scale topology's Temporal: the schema is
set up on a new database with Temporal's own schema code, an older schema is
refused until you start once with --upgrade-schema. Gateways and workers reach
it by temporal.address (AGENTRY_TEMPORAL_ADDRESS). See docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !embeddedAvailable {
				return errors.New("this build has no embedded Temporal server")
			}
			ctx := cmd.Context()
			pgOpts, err := pg.resolve()
			if err != nil {
				return usageError{err}
			}
			cfg, log, closer, err := loadRuntime(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closer.Close()
			if err := cfg.Workspace.Ensure(); err != nil {
				return err
			}
			srv, err := startEmbeddedTemporalWith(ctx, cfg, log, pgOpts)
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
	}
	pg.register(temporalCmd)
	dev.AddCommand(temporalCmd)
	return dev
}
