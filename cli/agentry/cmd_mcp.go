package agentry

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// mcpTimeout bounds PUT /mcp/own/{id}: the gateway contacts the server and
// lists its tools before it answers.
const mcpTimeout = 60 * time.Second

func (a *App) mcpCommand() *cobra.Command {
	var name, transport, url, command string
	var headers, args, env []string
	add := &cobra.Command{
		Use:   "add --name ID --transport http|stdio (--url URL [--header 'Name: value']... | --command CMD [--args ARG]... [--env K=V]...)",
		Short: "Register (or update) an MCP server on the gateway; its tools become mcp__<id>__<tool>",
		Long: "Calls PUT /api/v1/mcp/own/{id}: the gateway contacts the server and lists its tools before it answers.\n" +
			"Header and env values are stored encrypted and never shown again. A failure never edits local files.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usagef("--name is required")
			}
			spec := apiclient.MCPServerSpec{Transport: openapi.MCPServerSpecTransport(transport), URL: url, Command: command, Args: args}
			switch transport {
			case "http":
				if url == "" {
					return usagef("--transport http needs --url")
				}
				if command != "" || len(args) > 0 || len(env) > 0 {
					return usagef("--command, --args and --env are for --transport stdio")
				}
				h, err := pairs(headers, ":", "--header", "'Name: value'")
				if err != nil {
					return err
				}
				spec.Headers = h
			case "stdio":
				if command == "" {
					return usagef("--transport stdio needs --command")
				}
				if url != "" || len(headers) > 0 {
					return usagef("--url and --header are for --transport http")
				}
				e, err := pairs(env, "=", "--env", "KEY=value")
				if err != nil {
					return err
				}
				spec.Env = e
			default:
				return usagef("--transport must be http or stdio")
			}
			c, err := a.client(mcpTimeout)
			if err != nil {
				return err
			}
			if !a.jsonOut {
				fmt.Fprintf(a.Stderr, "Contacting MCP server %s through %s ...\n", name, a.target.URL)
			}
			s, err := c.PutMCPServer(cmd.Context(), name, spec)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, s.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "MCP server %s registered (%s): %d tools: %s\n", s.ID, s.Status, len(s.Tools), strings.Join(s.Tools, ", "))
			return nil
		},
	}
	f := add.Flags()
	f.StringVar(&name, "name", "", "server id (lower-case letters, digits, _ and -)")
	f.StringVar(&transport, "transport", "", "http or stdio")
	f.StringVar(&url, "url", "", "streamable HTTP endpoint (http)")
	f.StringArrayVar(&headers, "header", nil, "request header 'Name: value' (http; repeatable; stored encrypted)")
	f.StringVar(&command, "command", "", "executable inside the workspace's mcp-servers/ folder (stdio)")
	f.StringArrayVar(&args, "args", nil, "argument for the command (stdio; repeatable)")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=value (stdio; repeatable; stored encrypted)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List MCP servers with their status and tools",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.MCPServers(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Servers) == 0 {
				fmt.Fprintln(a.Stdout, "No MCP servers.")
				return nil
			}
			rows := [][]string{}
			for _, s := range l.Servers {
				where := s.URL
				if s.Transport == "stdio" {
					where = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
				}
				status := string(s.Status)
				if s.Error != "" {
					status += ": " + s.Error
				}
				rows = append(rows, []string{s.ID, string(s.Transport), string(s.Source), where, fmt.Sprint(len(s.Tools)), status})
			}
			table(a.Stdout, []string{"ID", "TRANSPORT", "SOURCE", "TARGET", "TOOLS", "STATUS"}, rows)
			return nil
		},
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove an MCP server registered through the API",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			if err := c.DeleteMCPServer(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"id": args[0], "removed": true})
			}
			fmt.Fprintf(a.Stdout, "MCP server %s removed.\n", args[0])
			return nil
		},
	}
	return group("mcp", "Manage MCP servers (admin)", add, list, remove)
}

// pairs parses repeatable "key<sep>value" flags.
func pairs(items []string, sep, flag, form string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, sep)
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usagef("%s wants %s", flag, form)
		}
		if sep == ":" {
			v = strings.TrimSpace(v) // "Authorization: Bearer x"
		}
		out[k] = v
	}
	return out, nil
}
