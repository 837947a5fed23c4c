// Package agentry holds the Cobra commands of the agentry command-line
// client. It talks to a gateway over the REST API only (internal/apiclient,
// generated from docs/openapi.yaml); the few commands that change this
// machine (setup, workspace migrate, server start, seed-examples) are
// refused for remote targets before they touch a file.
package agentry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/config"
)

// Annotation keys of commands.
const (
	// AnnotationHostChanging marks a command that changes files or services
	// on the client's machine; it is refused for remote targets. The value
	// "unless-dry-run" exempts a run with --dry-run.
	AnnotationHostChanging = "agentry.host-changing"
	// annotationNoTarget marks commands that work without a gateway (their
	// target errors are not fatal, e.g. doctor reports them itself).
	annotationNoTarget = "agentry.no-target"
)

// App is one invocation of the client.
type App struct {
	Version string
	Env     config.Env
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer

	flagGateway, flagContext, flagAPIKey string
	jsonOut                              bool

	cfg       *config.Loaded
	cfgErr    error
	target    Target
	targetErr error
}

// NewRootCommand builds `agentry` for an App.
func NewRootCommand(a *App) *cobra.Command {
	if a.Env == nil {
		a.Env = config.OSEnv
	}
	root := &cobra.Command{
		Use:   "agentry",
		Short: "Command-line client of an Agentry gateway",
		Long: `agentry drives an Agentry gateway over its REST API.

The gateway is chosen once, before a command runs, in this order:
--gateway/--api-key/--context flags, then AGENTRY_GATEWAY/AGENTRY_API_KEY/
AGENTRY_CONTEXT, then the selected context (cli.active_context), then the
local configuration (cli.gateway_url or server.host:server.port, and
server.api_key or the workspace's generated key).`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		Version:           a.Version,
		Args:              cobra.ArbitraryArgs,
		PersistentPreRunE: a.prepare,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	root.SetIn(a.Stdin)
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&a.flagGateway, "gateway", "", "gateway URL (default: the context's, cli.gateway_url, or http://127.0.0.1:<server.port>)")
	pf.StringVar(&a.flagContext, "context", "", "named context under cli.contexts (default: AGENTRY_CONTEXT or cli.active_context)")
	pf.StringVar(&a.flagAPIKey, "api-key", "", "API key (default: the context's, server.api_key or the workspace's generated key)")
	pf.BoolVar(&a.jsonOut, "json", false, "print raw JSON")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	root.AddCommand(
		a.contextCommand(),
		a.agentCommand(),
		a.chatCommand(),
		a.channelCommand(),
		a.memoryCommand(),
		a.scheduleCommand(),
		a.logsCommand(),
		a.secretCommand(),
		a.pluginCommand(),
		a.mcpCommand(),
		a.skillCommand(),
		a.workspaceCommand(),
		a.serverCommand(),
		a.versionCommand(),
		a.updateCommand(),
		a.setupCommand(),
		a.onboardCommand(),
		a.daemonCommand(),
		a.seedExamplesCommand(),
		a.doctorCommand(),
		a.evalCommand(),
		a.webhookCommand(),
		a.registryCommand(),
		a.pullCommand(),
		a.costsCommand(),
		a.approvalsCommand(),
		a.workboardCommand(),
		a.taskCommand(),
		a.packageCommand(),
		a.knowledgeCommand(),
		a.voiceCommand(),
	)
	return root
}

// prepare loads the local configuration and resolves the target once,
// then refuses host-changing commands for remote targets, before the
// command does anything.
func (a *App) prepare(cmd *cobra.Command, _ []string) error {
	a.cfg, a.cfgErr = config.Load(cmd.Context(), a.Env)
	if a.cfgErr != nil {
		a.cfg = nil
	}
	a.target, a.targetErr = Resolve(Inputs{FlagGateway: a.flagGateway, FlagAPIKey: a.flagAPIKey, FlagContext: a.flagContext,
		Env: a.Env, Config: a.cfg, ConfigErr: a.cfgErr})
	var ue *usageError
	if errors.As(a.targetErr, &ue) && cmd.Annotations[annotationNoTarget] == "" {
		// Unknown context, malformed URL: a usage error for every command
		// but those that repair contexts or report problems themselves.
		return a.targetErr
	}
	if mode, ok := hostChanging(cmd); ok && a.targetErr == nil && !a.target.Local {
		if mode == "unless-dry-run" {
			if f := cmd.Flags().Lookup("dry-run"); f != nil && f.Value.String() == "true" {
				return nil
			}
		}
		return fmt.Errorf("refusing %q: the target gateway %s is remote, and this command changes this machine; no local files changed. Run it on the gateway's host, or choose a local target",
			cmd.CommandPath(), a.target.Describe())
	}
	return nil
}

func hostChanging(cmd *cobra.Command) (string, bool) {
	for c := cmd; c != nil; c = c.Parent() {
		if v, ok := c.Annotations[AnnotationHostChanging]; ok {
			return v, true
		}
	}
	return "", false
}

// client returns an API client for the target; timeout 0 is the default.
func (a *App) client(timeout time.Duration) (*apiclient.Client, error) {
	if a.targetErr != nil {
		return nil, a.targetErr
	}
	return apiclient.New(a.target.URL, a.target.APIKey, apiclient.Options{Timeout: timeout, UserAgent: "agentry/" + a.Version})
}

// runTimeout bounds commands that wait for an agent run.
const runTimeout = 20 * time.Minute

// localConfig returns the loaded local configuration or why it is missing.
func (a *App) localConfig() (*config.Loaded, error) {
	if a.cfg == nil {
		return nil, fmt.Errorf("local configuration: %w", a.cfgErr)
	}
	return a.cfg, nil
}

// Execute runs the client with the process's arguments and streams, and
// returns the exit code: 0 ok, 1 failure, 2 usage.
func Execute(version string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &App{Version: version, Env: config.OSEnv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	return a.Run(ctx, os.Args[1:])
}

// Run executes one command line and returns the exit code.
func (a *App) Run(ctx context.Context, args []string) int {
	root := NewRootCommand(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(a.Stderr, "agentry:", ee.msg)
		}
		return ee.code
	}
	if isUsage(err) {
		fmt.Fprintln(a.Stderr, "agentry:", err)
		if cmd == nil {
			cmd = root
		}
		if showsUsage(err) {
			fmt.Fprintln(a.Stderr)
			fmt.Fprint(a.Stderr, cmd.UsageString())
		} else {
			fmt.Fprintf(a.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return ExitUsage
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return ExitFailure
	}
	fmt.Fprintln(a.Stderr, "agentry:", strings.TrimSpace(err.Error()))
	return ExitFailure
}
