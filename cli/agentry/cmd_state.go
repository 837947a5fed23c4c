package agentry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

// memorySessionsCommand lists the conversations the gateway keeps
// (GET /memory; before issue 45 this was `memory list`).
func (a *App) memorySessionsCommand() *cobra.Command {
	var agentID string
	var limit int
	list := &cobra.Command{
		Use:   "sessions --agent ID",
		Short: "List an agent's remembered conversations (needs memory:read)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agentID == "" {
				return usagef("memory sessions needs --agent ID")
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.Memory(cmd.Context(), agentID, limit)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Sessions) == 0 {
				fmt.Fprintf(a.Stdout, "No conversations remembered for agent %s.\n", agentID)
				return nil
			}
			rows := [][]string{}
			for _, s := range l.Sessions {
				t := s.UpdatedAt
				rows = append(rows, []string{s.SessionID, s.UserID, s.Source, strconv.FormatInt(s.Messages, 10), fmtTime(&t)})
			}
			table(a.Stdout, []string{"SESSION", "USER", "SOURCE", "MESSAGES", "UPDATED"}, rows)
			return nil
		},
	}
	list.Flags().StringVar(&agentID, "agent", "", "agent id (required)")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many sessions, newest first")
	return list
}

func (a *App) scheduleCommand() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List scheduled agents with their next fire times and last outcome",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Schedules) == 0 {
				fmt.Fprintln(a.Stdout, "No scheduled agents.")
				return nil
			}
			rows := [][]string{}
			for _, s := range l.Schedules {
				next := "-"
				if len(s.NextFireTimes) > 0 {
					next = fmtTime(&s.NextFireTimes[0])
				}
				last := "-"
				if s.LastOutcome != nil && s.LastOutcome.Status != "" {
					last = string(s.LastOutcome.Status)
					if !s.LastOutcome.At.IsZero() {
						last += " at " + fmtTime(&s.LastOutcome.At)
					}
					if s.LastOutcome.Error != "" {
						last += ": " + s.LastOutcome.Error
					}
				}
				tz := s.Timezone
				if tz == "" {
					tz = "UTC"
				}
				rows = append(rows, []string{s.AgentID, s.Cron, tz, yesNo(s.Paused), next, last})
			}
			table(a.Stdout, []string{"AGENT", "CRON", "TIMEZONE", "PAUSED", "NEXT", "LAST OUTCOME"}, rows)
			return nil
		},
	}
	return group("schedule", "Inspect scheduled agents", list)
}

func (a *App) logsCommand() *cobra.Command {
	var follow, auditLog bool
	var lines int
	cmd := &cobra.Command{
		Use:   "logs [--follow] [--lines N] [--audit]",
		Short: "Print the gateway's recent log lines; --follow keeps printing new ones; --audit prints the audit log (admin)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lines < 0 {
				return usagef("--lines must not be negative")
			}
			if auditLog {
				if follow {
					return usagef("--audit and --follow do not go together")
				}
				c, err := a.client(0)
				if err != nil {
					return err
				}
				l, err := c.AuditLog(cmd.Context(), max(lines, 1))
				return a.printLogLines(l, err)
			}
			if !follow {
				c, err := a.client(0)
				if err != nil {
					return err
				}
				l, err := c.Logs(cmd.Context(), max(lines, 1))
				return a.printLogLines(l, err)
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(a.Stdout)
			err = c.FollowLogs(cmd.Context(), lines, func(line string) error {
				if a.jsonOut {
					return enc.Encode(map[string]string{"line": line})
				}
				_, werr := fmt.Fprintln(a.Stdout, line)
				return werr
			})
			if errors.Is(err, context.Canceled) {
				return nil // Ctrl-C ends a follow normally
			}
			if err == nil {
				return errors.New("the gateway ended the log stream (shutting down?)")
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until interrupted")
	cmd.Flags().IntVarP(&lines, "lines", "n", 200, "how many recent lines to print first")
	cmd.Flags().BoolVar(&auditLog, "audit", false, "print the audit log (runtime.audit_log): one JSON object per line")
	return cmd
}

// printLogLines prints log or audit lines, one a line (--json: the answer).
func (a *App) printLogLines(l *apiclient.LogLines, err error) error {
	if err != nil {
		return err
	}
	if a.jsonOut {
		return printJSON(a.Stdout, l.RawJSON())
	}
	for _, line := range l.Lines {
		fmt.Fprintln(a.Stdout, line)
	}
	return nil
}

// shortDuration prints a latency readably.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	default:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
}

// splitSet parses one --set key=value; the value is JSON when it parses as
// JSON (true, 5, ["a","b"], "text"), else the literal text.
func splitSet(arg string) (string, string, error) {
	k, v, ok := strings.Cut(arg, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return "", "", usagef("--set %q: expected key=value", arg)
	}
	return strings.TrimSpace(k), v, nil
}
