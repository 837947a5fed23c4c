package agentry

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/textcut"
)

// memoryCommand is `agentry memory list|get|delete|sessions` (docs/memory.md).
func (a *App) memoryCommand() *cobra.Command {
	var agentID, user, subject, kind string
	var limit int
	list := &cobra.Command{
		Use:   "list --agent ID [--user ID] [--subject S] [--kind fact|archive]",
		Short: "List an agent's memories, most recently used first (another subject's need memory:read)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agentID == "" {
				return usagef("memory list needs --agent ID")
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			q := apiclient.MemoryQuery{AgentID: agentID, Kind: kind, Limit: limit}
			if cmd.Flags().Changed("user") {
				q.User = &user
			}
			if cmd.Flags().Changed("subject") {
				q.Subject = &subject
			}
			l, err := c.MemoryEntries(cmd.Context(), q)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Memories) == 0 {
				fmt.Fprintf(a.Stdout, "No memories of agent %s.\n", agentID)
				return nil
			}
			rows := [][]string{}
			for _, m := range l.Memories {
				u := m.UserID
				if u == "" {
					u = "-"
				}
				t := m.UsedAt
				rows = append(rows, []string{strconv.FormatInt(m.ID, 10), string(m.Kind), m.Subject, u, fmtTime(&t), textcut.Prefix(m.Text, 60)})
			}
			table(a.Stdout, []string{"ID", "KIND", "SUBJECT", "USER", "USED", "TEXT"}, rows)
			return nil
		},
	}
	list.Flags().StringVar(&agentID, "agent", "", "agent id (required)")
	list.Flags().StringVar(&user, "user", "", "only this end user's memories (\"\": the subject's own)")
	list.Flags().StringVar(&subject, "subject", "", "another subject's memories (memory:read; \"\" every subject)")
	list.Flags().StringVar(&kind, "kind", "", "fact or archive")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")

	entry := func(use, short string, run func(cmd *cobra.Command, c *apiclient.Client, e *apiclient.MemoryEntry) error) *cobra.Command {
		var agent, user string
		cmd := &cobra.Command{
			Use:   use + " ID --agent ID",
			Short: short,
			Args:  exactArgs(1, "ID"),
			RunE: func(cmd *cobra.Command, args []string) error {
				if agent == "" {
					return usagef("memory %s needs --agent ID", use)
				}
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id <= 0 {
					return usagef("%q is not a memory id", args[0])
				}
				c, err := a.client(0)
				if err != nil {
					return err
				}
				e, err := c.MemoryEntryByID(cmd.Context(), id)
				if err != nil {
					return err
				}
				if e.AgentID != agent {
					return fmt.Errorf("memory %d belongs to agent %s, not %s", id, e.AgentID, agent)
				}
				if cmd.Flags().Changed("user") && e.UserID != user {
					return fmt.Errorf("memory %d belongs to user %q, not %q", id, e.UserID, user)
				}
				return run(cmd, c, e)
			},
		}
		cmd.Flags().StringVar(&agent, "agent", "", "the agent the memory belongs to (required)")
		cmd.Flags().StringVar(&user, "user", "", "the end user the memory must belong to (checked)")
		return cmd
	}
	get := entry("get", "Show one memory", func(_ *cobra.Command, _ *apiclient.Client, e *apiclient.MemoryEntry) error {
		if a.jsonOut {
			return printJSON(a.Stdout, e.RawJSON())
		}
		u := e.UserID
		if u == "" {
			u = "-"
		}
		fmt.Fprintf(a.Stdout, "memory %d (%s) of agent %s, subject %s, user %s\ncreated %s, used %s, source %s\n\n%s\n",
			e.ID, e.Kind, e.AgentID, e.Subject, u, fmtTime(&e.CreatedAt), fmtTime(&e.UsedAt), e.Source, e.Text)
		return nil
	})
	del := entry("delete", "Forget one memory", func(cmd *cobra.Command, c *apiclient.Client, e *apiclient.MemoryEntry) error {
		if err := c.DeleteMemoryEntry(cmd.Context(), e.ID); err != nil {
			return err
		}
		if a.jsonOut {
			return printValue(a.Stdout, map[string]any{"id": e.ID, "deleted": true})
		}
		fmt.Fprintf(a.Stdout, "Memory %d deleted.\n", e.ID)
		return nil
	})
	return group("memory", "Inspect and forget what agents remember", list, get, del, a.memorySessionsCommand())
}
