package agentry

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

func (a *App) pluginCommand() *cobra.Command {
	show := func(l *apiclient.PluginList) error {
		if a.jsonOut {
			return printJSON(a.Stdout, l.RawJSON())
		}
		if len(l.Plugins) == 0 {
			fmt.Fprintln(a.Stdout, "No plugins (add folders to plugin_dirs or <workspace>/plugins/).")
			return nil
		}
		rows := [][]string{}
		for _, p := range l.Plugins {
			rows = append(rows, []string{p.ID, p.Version, p.Status, strings.Join(p.Offered, ","), p.Error})
		}
		table(a.Stdout, []string{"ID", "VERSION", "STATUS", "TOOLS", "ERROR"}, rows)
		return nil
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the plugins, loaded or not (and why not)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.Plugins(cmd.Context())
			if err != nil {
				return err
			}
			return show(l)
		},
	}
	rescan := &cobra.Command{
		Use:   "rescan",
		Short: "Rescan the plugin folders now (new and changed plugins start, removed ones stop)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.RescanPlugins(cmd.Context())
			if err != nil {
				return err
			}
			return show(l)
		},
	}
	return group("plugin", "Plugins: out-of-process extensions speaking MCP over stdio (admin)", list, rescan)
}
