// Package agentryd holds the Cobra commands of the gateway binary.
package agentryd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/gateway"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/logging"
	"github.com/agentryhq/agentry/internal/procs"
)

// NewRootCommand is `agentryd`: with no subcommand it runs the gateway in
// the foreground until SIGINT or SIGTERM.
func NewRootCommand(version string) *cobra.Command {
	root := &cobra.Command{
		Use:           "agentryd",
		Short:         "Agentry gateway: hosts AI agents behind one HTTP API and runs their long work on Temporal",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGateway(cmd.Context(), version, cmd.ErrOrStderr())
		},
	}
	root.AddCommand(newWorkerCommand(), newDevCommand(), newTokenCommand(), newRegistryCommand(), newBuildCommand(version), newDriversCommand())
	return root
}

// Execute runs the root command with signal handling and maps errors to
// exit codes: 1 for failures, 2 for usage errors.
func Execute(version string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewRootCommand(version)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "agentryd:", err)
		if _, ok := err.(usageError); ok || isUnknownCommand(err) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ error }

func isUnknownCommand(err error) bool {
	msg := err.Error()
	return len(msg) > 16 && (msg[:16] == "unknown command " || msg[:15] == "unknown flag: -" || msg[:10] == "accepts 0 ")
}

// loadRuntime loads the config and builds the logger.
func loadRuntime(ctx context.Context, stderr io.Writer) (*config.Loaded, *slog.Logger, io.Closer, error) {
	cfg, err := config.Load(ctx, config.OSEnv)
	if err != nil {
		return nil, nil, nil, err
	}
	log, closer, err := logging.New(cfg.Log, cfg.Workspace, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, log, closer, nil
}

func runGateway(ctx context.Context, version string, stderr io.Writer) error {
	cfg, log, closer, err := loadRuntime(ctx, stderr)
	if err != nil {
		return err
	}
	applyGC(cfg.Server) // the process's, like GOMAXPROCS below
	defer closer.Close()
	g, err := gateway.Start(ctx, gateway.Options{Config: cfg, Logger: log, Version: version, StartTemporal: startEmbeddedTemporal, Notice: stderr})
	if err != nil {
		return err
	}
	if cfg.Server.AdaptiveProcs {
		// Here and not in gateway.Start: GOMAXPROCS belongs to the process,
		// and tests run several gateways in one. It stops (restoring every
		// processor) when ctx does, at the shutdown signal.
		procs.Start(ctx, log)
	}
	fmt.Fprintf(stderr, "Agentry gateway listening on %s (Ctrl-C to stop)\n", g.URL())
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case serveErr = <-g.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), g.ShutdownTimeout())
	defer cancel()
	if err := g.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	return serveErr
}
