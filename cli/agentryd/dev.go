package agentryd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/dev/fakellm"
)

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Development helpers: the embedded Temporal server alone, a fake LLM provider"}
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
	var addr string
	fake := &cobra.Command{
		Use:   "fake-llm",
		Short: "Run the scripted fake LLM provider (OpenAI, Anthropic and Ollama wire formats) for trying the gateway without a model",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, log, closer, err := loadRuntime(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closer.Close()
			fmt.Fprintf(cmd.ErrOrStderr(), "fake LLM provider on http://%s\n", addr)
			return fakellm.Run(cmd.Context(), addr, log)
		},
	}
	fake.Flags().StringVar(&addr, "addr", "127.0.0.1:11434", "listen address (the default is Ollama's, so a fresh gateway talks to it)")
	dev.AddCommand(fake)
	return dev
}
