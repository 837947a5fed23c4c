package agentry

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/config"
)

var contextNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// configFileForWrite is the config.yaml the client edits: the one that was
// loaded, or the workspace's when there is none yet.
func (a *App) configFileForWrite() (string, error) {
	cfg, err := a.localConfig()
	if err != nil {
		return "", fmt.Errorf("%w (fix it before changing contexts)", err)
	}
	if cfg.Path != "" {
		return cfg.Path, nil
	}
	return cfg.Workspace.ConfigFile(), nil
}

func (a *App) contextCommand() *cobra.Command {
	add := &cobra.Command{
		Use:   "add NAME --gateway URL [--api-key KEY]",
		Short: "Add or replace a named gateway target (cli.contexts.NAME)",
		Long: `Stores --gateway and --api-key (the global flags) under cli.contexts.NAME
in the local config.yaml. The key is kept in that file (mode 0600); leave it
out to send AGENTRY_API_KEY or --api-key at each call instead.`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !contextNameRe.MatchString(name) {
				return usagef("context name %q: use letters, digits, _, . or -", name)
			}
			if a.flagGateway == "" {
				return usagef("context add needs --gateway URL")
			}
			if err := checkURL(a.flagGateway); err != nil {
				return usagef("--gateway %q: %v", a.flagGateway, err)
			}
			path, err := a.configFileForWrite()
			if err != nil {
				return err
			}
			ctxNode := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			ctxNode.Content = append(ctxNode.Content, config.StringNode("gateway_url"), config.StringNode(a.flagGateway))
			if a.flagAPIKey != "" {
				ctxNode.Content = append(ctxNode.Content, config.StringNode("api_key"), config.StringNode(a.flagAPIKey))
			}
			if err := config.EditFile(path, func(root *yaml.Node) error {
				if _, err := config.SetPath(root, []string{"cli", "contexts", name}, ctxNode); err != nil {
					return err
				}
				return nil
			}, nil); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"context": name, "gateway_url": a.flagGateway, "api_key_set": a.flagAPIKey != "", "file": path})
			}
			fmt.Fprintf(a.Stdout, "Context %q -> %s saved in %s\n", name, a.flagGateway, path)
			return nil
		},
	}
	// context add stores the flags; it must not be refused or resolved
	// against the very gateway it names.
	add.Annotations = map[string]string{annotationNoTarget: "true"}

	list := &cobra.Command{
		Use:   "list",
		Short: "List contexts (keys are not shown)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.localConfig()
			if err != nil {
				return err
			}
			names := make([]string, 0, len(cfg.CLI.Contexts))
			for n := range cfg.CLI.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			if a.jsonOut {
				items := []map[string]any{}
				for _, n := range names {
					c := cfg.CLI.Contexts[n]
					items = append(items, map[string]any{"name": n, "gateway_url": c.GatewayURL, "api_key_set": c.APIKey != "", "active": n == cfg.CLI.ActiveContext, "selected": n == a.target.Context})
				}
				return printValue(a.Stdout, map[string]any{"contexts": items, "active_context": cfg.CLI.ActiveContext})
			}
			if len(names) == 0 {
				fmt.Fprintln(a.Stdout, "No contexts. Add one with: agentry context add NAME --gateway URL [--api-key KEY]")
				return nil
			}
			rows := [][]string{}
			for _, n := range names {
				c := cfg.CLI.Contexts[n]
				mark := ""
				if n == cfg.CLI.ActiveContext {
					mark = "*"
				}
				key := "none"
				if c.APIKey != "" {
					key = "set"
				}
				rows = append(rows, []string{mark, n, c.GatewayURL, key})
			}
			table(a.Stdout, []string{"ACTIVE", "NAME", "GATEWAY", "API KEY"}, rows)
			return nil
		},
	}

	list.Annotations = map[string]string{annotationNoTarget: "true"}

	use := &cobra.Command{
		Use:   "use NAME",
		Short: "Select the active context (cli.active_context); \"\" or --clear selects the local gateway",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			clear, _ := cmd.Flags().GetBool("clear")
			if len(args) == 0 && !clear {
				return usagef("context use takes NAME (or --clear)")
			}
			cfg, err := a.localConfig()
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if name != "" {
				if _, ok := cfg.CLI.Contexts[name]; !ok {
					return usagef("context %q does not exist; known contexts: %s", name, knownContexts(cfg))
				}
			}
			path, err := a.configFileForWrite()
			if err != nil {
				return err
			}
			if err := config.EditFile(path, func(root *yaml.Node) error {
				if name == "" {
					config.DeletePath(root, []string{"cli", "active_context"})
				} else {
					if _, err := config.SetPath(root, []string{"cli", "active_context"}, config.StringNode(name)); err != nil {
						return err
					}
				}
				return nil
			}, nil); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"active_context": name, "file": path})
			}
			if name == "" {
				fmt.Fprintln(a.Stdout, "No active context: commands target the local gateway.")
			} else {
				fmt.Fprintf(a.Stdout, "Active context: %s (%s)\n", name, cfg.CLI.Contexts[name].GatewayURL)
			}
			return nil
		},
	}
	use.Flags().Bool("clear", false, "clear the active context")
	use.Annotations = map[string]string{annotationNoTarget: "true"}

	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a context",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.localConfig()
			if err != nil {
				return err
			}
			name := args[0]
			if _, ok := cfg.CLI.Contexts[name]; !ok {
				return usagef("context %q does not exist; known contexts: %s", name, knownContexts(cfg))
			}
			path, err := a.configFileForWrite()
			if err != nil {
				return err
			}
			if err := config.EditFile(path, func(root *yaml.Node) error {
				config.DeletePath(root, []string{"cli", "contexts", name})
				if cfg.CLI.ActiveContext == name {
					config.DeletePath(root, []string{"cli", "active_context"})
				}
				return nil
			}, nil); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"removed": name})
			}
			fmt.Fprintf(a.Stdout, "Context %q removed.\n", name)
			return nil
		},
	}
	remove.Annotations = map[string]string{annotationNoTarget: "true"}

	current := &cobra.Command{
		Use:   "current",
		Short: "Show the resolved target: gateway URL, context and where each came from",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.targetErr != nil {
				return a.targetErr
			}
			t := a.target
			if a.jsonOut {
				return printValue(a.Stdout, t)
			}
			where := "remote"
			if t.Local {
				where = "local"
			}
			key := "none"
			if t.KeyFrom != "" {
				key = "from " + t.KeyFrom
			}
			ctx := t.Context
			if ctx != "" {
				ctx += " (from " + t.ContextFrom + ")"
			}
			keyValues(a.Stdout, [][2]string{{"gateway", t.URL + " (from " + t.URLFrom + ")"}, {"target", where}, {"context", ctx}, {"api key", key}})
			return nil
		},
	}
	return group("context", "Manage named gateway targets (cli.contexts)", add, list, use, remove, current)
}
